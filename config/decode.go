package config

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-ci/berth/policy"
)

// The file is decoded in two steps: BurntSushi/toml turns the text into a
// generic map (catching syntax errors with their position), then this
// decoder walks the map with full knowledge of every key's path. Decoding
// straight into structs would be shorter, but the library's type errors
// carry neither array indices nor reliable lines for arrays of tables, and
// reporting the exact key and line is part of the contract.

// Duration is a time.Duration written as a Go duration string ("15m",
// "1h30m"). It implements encoding.TextUnmarshaler and TextMarshaler so that
// it works with TOML and JSON codecs; Config itself uses time.Duration for
// convenience.
type Duration time.Duration

// UnmarshalText parses a duration such as "90s" with time.ParseDuration.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(text)))
	if err != nil {
		return fmt.Errorf("not a duration; write it like \"30s\", \"15m\" or \"1h30m\"")
	}
	*d = Duration(v)
	return nil
}

// MarshalText renders the duration as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}

// origin records where things came from in the file.
type origin struct {
	file        string
	lines       lineIndex
	sourcePaths []string           // "source" or "source[i]" per Config.Sources entry
	policyPaths []string           // "autoscaler.policy" or "...[i]" per policy period; empty when defaulted
	written     map[string]written // key path → value as written, for messages
}

// written is a value as it appears in the file.
type written struct {
	text string // rendered for messages (tokens redacted)
	raw  any    // as decoded by toml
}

type decoder struct {
	file   string
	dir    string
	lines  lineIndex
	issues []Issue
	origin *origin
	// onKnown, when set, sees the path of every key the decoder asks for;
	// tests use it to check that the sample file covers every key.
	onKnown func(path string)
}

func (d *decoder) issue(path string, value any, format string, args ...any) {
	v := ""
	if value != nil {
		v = render(value)
	}
	d.issues = append(d.issues, Issue{
		File:    d.file,
		Line:    d.lines.line(path),
		Key:     path,
		Value:   v,
		Message: fmt.Sprintf(format, args...),
	})
}

// table is one TOML table being decoded. Keys are marked as used when read,
// and finish reports the rest as unknown.
type table struct {
	d     *decoder
	path  string
	m     map[string]any
	used  map[string]bool
	known []string
}

func (d *decoder) table(path string, m map[string]any) *table {
	return &table{d: d, path: path, m: m, used: map[string]bool{}}
}

func (t *table) key(k string) string { return joinKey(t.path, k) }

// get returns the raw value of k and marks it as used.
func (t *table) get(k string) (any, bool) {
	t.known = append(t.known, k)
	if t.d.onKnown != nil {
		t.d.onKnown(t.key(k))
	}
	v, ok := t.m[k]
	if ok {
		t.used[k] = true
		t.d.origin.written[t.key(k)] = written{text: render(redact(k, v)), raw: v}
	}
	return v, ok
}

func (t *table) typeErr(k string, v any, want string) {
	t.d.issue(t.key(k), redact(k, v), "must be %s, not %s", want, tomlType(v))
}

func (t *table) str(k string, dst *string) bool {
	v, ok := t.get(k)
	if !ok {
		return false
	}
	s, isStr := v.(string)
	if !isStr {
		t.typeErr(k, v, "a string")
		return false
	}
	*dst = s
	return true
}

func (t *table) int(k string, dst *int) {
	v, ok := t.get(k)
	if !ok {
		return
	}
	i, isInt := v.(int64)
	if !isInt {
		t.typeErr(k, v, "an integer")
		return
	}
	if int64(int(i)) != i || i > math.MaxInt32 || i < math.MinInt32 {
		t.d.issue(t.key(k), v, "is out of range")
		return
	}
	*dst = int(i)
}

func (t *table) float(k string, dst *float64) {
	v, ok := t.get(k)
	if !ok {
		return
	}
	switch n := v.(type) {
	case float64:
		*dst = n
	case int64:
		*dst = float64(n)
	default:
		t.typeErr(k, v, "a number")
	}
}

func (t *table) bool(k string, dst *bool) {
	v, ok := t.get(k)
	if !ok {
		return
	}
	b, isBool := v.(bool)
	if !isBool {
		t.typeErr(k, v, "true or false")
		return
	}
	*dst = b
}

func (t *table) duration(k string, dst *time.Duration) {
	v, ok := t.get(k)
	if !ok {
		return
	}
	s, isStr := v.(string)
	if !isStr {
		t.typeErr(k, v, `a duration string such as "15m"`)
		return
	}
	var d Duration
	if err := d.UnmarshalText([]byte(s)); err != nil {
		t.d.issue(t.key(k), v, "%v", err)
		return
	}
	*dst = time.Duration(d)
}

func (t *table) strings(k string, dst *[]string) {
	v, ok := t.get(k)
	if !ok {
		return
	}
	arr, isArr := v.([]any)
	if !isArr {
		t.typeErr(k, v, "an array of strings")
		return
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, isStr := e.(string)
		if !isStr {
			t.d.issue(t.key(k)+"["+strconv.Itoa(i)+"]", e, "must be a string, not %s", tomlType(e))
			return
		}
		out = append(out, s)
		t.d.origin.written[t.key(k)+"["+strconv.Itoa(i)+"]"] = written{text: render(s), raw: s}
	}
	*dst = out
}

// sub returns the sub-table k, or nil when absent or not a table.
func (t *table) sub(k string) *table {
	v, ok := t.get(k)
	if !ok {
		return nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		t.typeErr(k, v, "a table")
		return nil
	}
	return t.d.table(t.key(k), m)
}

// tables accepts k as one table ([k]) or an array of tables ([[k]] or an
// inline array); present reports whether the key was there at all.
func (t *table) tables(k string) (tabs []*table, present bool) {
	v, ok := t.get(k)
	if !ok {
		return nil, false
	}
	path := t.key(k)
	switch x := v.(type) {
	case map[string]any:
		return []*table{t.d.table(path, x)}, true
	case []map[string]any:
		for i, m := range x {
			tabs = append(tabs, t.d.table(path+"["+strconv.Itoa(i)+"]", m))
		}
		return tabs, true
	case []any:
		for i, e := range x {
			p := path + "[" + strconv.Itoa(i) + "]"
			m, isMap := e.(map[string]any)
			if !isMap {
				t.d.issue(p, e, "must be a table, not %s", tomlType(e))
				continue
			}
			tabs = append(tabs, t.d.table(p, m))
		}
		return tabs, true
	default:
		t.typeErr(k, v, "a table or an array of tables")
		return nil, true
	}
}

// finish reports keys that were never read, in file order, with a hint
// when one is close to a known key.
func (t *table) finish() {
	var unknown []string
	for k := range t.m {
		if !t.used[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Slice(unknown, func(i, j int) bool {
		li, lj := t.d.lines.line(t.key(unknown[i])), t.d.lines.line(t.key(unknown[j]))
		if li != lj {
			return li < lj
		}
		return unknown[i] < unknown[j]
	})
	for _, k := range unknown {
		msg := "unknown key"
		if h := runnerHint(t.path, k); h != "" {
			msg += "; " + h
		} else if s := suggest(k, t.known); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else if len(t.known) > 0 {
			msg += "; valid keys here: " + strings.Join(dedupe(t.known), ", ")
		} else {
			msg += "; this table takes no keys"
		}
		t.d.issue(t.key(k), nil, "%s", msg)
	}
}

func (d *decoder) decode(raw map[string]any) *Config {
	d.origin = &origin{written: map[string]written{}}
	c := Default()
	c.StateDir = ""
	root := d.table("", raw)

	root.str("listen", &c.Listen)
	if root.str("state_dir", &c.StateDir) {
		c.StateDir = d.resolveStateDir(c.StateDir)
	} else {
		c.StateDir = DefaultStateDir()
	}
	if root.str("tls_cert_file", &c.TLSCertFile) {
		c.TLSCertFile = d.resolvePath("tls_cert_file", c.TLSCertFile)
	}
	if root.str("tls_key_file", &c.TLSKeyFile) {
		c.TLSKeyFile = d.resolvePath("tls_key_file", c.TLSKeyFile)
	}
	root.bool("insecure_listen", &c.InsecureListen)
	if root.int("max_connections", &c.MaxConnections); c.MaxConnections < 16 {
		d.issue("max_connections", c.MaxConnections, "must be at least 16 (the default is %d); it bounds the API's open connections", DefaultMaxConnections)
	}
	root.str("log_level", &c.LogLevel)
	root.str("log_format", &c.LogFormat)
	root.duration("job_timeout", &c.JobTimeout)
	if secs, ok := raw["shutdown_timeout"].(int64); ok {
		// gitlab-runner's shutdown_timeout is a number of seconds.
		root.get("shutdown_timeout")
		d.issue("shutdown_timeout", secs, "must be a duration string such as \"5m\"; GitLab Runner's unit is seconds: write \"%ds\" (0 there meant its default, 30 s; berth's is 5m)", secs)
	} else {
		root.duration("shutdown_timeout", &c.ShutdownTimeout)
	}
	root.duration("job_retention", &c.JobRetention)
	root.duration("log_retention", &c.LogRetention)

	if srcs, present := root.tables("source"); present {
		c.Sources = nil
		for _, st := range srcs {
			c.Sources = append(c.Sources, d.source(st))
			d.origin.sourcePaths = append(d.origin.sourcePaths, st.path)
		}
	}

	if at := root.sub("autoscaler"); at != nil {
		d.autoscaler(at, &c.Autoscaler)
	}
	if ct := root.sub("cache"); ct != nil {
		d.cache(ct, &c.Cache)
	}
	if it := root.sub("images"); it != nil {
		d.images(it, &c.Images)
	}
	if ht := root.sub("ha"); ht != nil {
		c.HA = d.ha(ht)
	}
	root.finish()
	return c
}

func (d *decoder) source(t *table) Source {
	s := Source{Kind: SourceQueue}
	t.str("kind", &s.Kind)
	if s.Kind == SourceGitLab {
		s.RequestConcurrency = DefaultRequestConcurrency
		s.CheckInterval = DefaultCheckInterval
		s.OutputLimit = DefaultOutputLimitKiB << 10
	}
	t.str("url", &s.URL)
	hasToken := t.str("token", &s.Token)
	if t.str("token_file", &s.TokenFile) && s.TokenFile != "" && s.Kind == SourceGitLab {
		if hasToken {
			d.issue(t.key("token_file"), s.TokenFile, "token is set too; give either token or token_file, not both")
		} else {
			d.readToken(t, &s)
		}
	}
	t.int("request_concurrency", &s.RequestConcurrency)
	t.duration("check_interval", &s.CheckInterval)
	d.gitlabHTTP(t, &s)
	d.maxArtifactSize(t, &s)
	if s.Kind == SourceQueue {
		// These keys mean something only for GitLab; accepting them silently
		// on a queue source would hide a missing kind = "gitlab".
		for _, k := range gitlabOnlyKeys {
			if v, ok := t.m[k]; ok {
				d.issue(t.key(k), redact(k, v), "only valid for kind = %q; set kind = %q or remove it", SourceGitLab, SourceGitLab)
			}
		}
	}
	t.finish()
	return s
}

// gitlabOnlyKeys are the [source] keys a queue source refuses.
var gitlabOnlyKeys = []string{"url", "token", "token_file", "request_concurrency", "check_interval",
	"builds_dir", "output_limit", "ca_file", "proxy", "max_artifact_size", "image", "allow_shell_jobs"}

// gitlabHTTP reads the keys about where GitLab jobs run and how GitLab is
// reached: builds_dir, output_limit (in kilobytes, as gitlab-runner's),
// ca_file and proxy.
func (d *decoder) gitlabHTTP(t *table, s *Source) {
	t.str("builds_dir", &s.BuildsDir)
	if _, ok := t.m["output_limit"]; ok {
		kib := 0
		t.int("output_limit", &kib)
		if kib < 1 {
			d.issue(t.key("output_limit"), t.m["output_limit"], "must be at least 1 (kilobytes, as in gitlab-runner; the default is %d, 4 MiB)", DefaultOutputLimitKiB)
		} else {
			s.OutputLimit = kib << 10
		}
	} else {
		t.get("output_limit") // known, for hints and the sample check
	}
	if t.str("ca_file", &s.CAFile) && s.CAFile != "" && s.Kind == SourceGitLab {
		written := s.CAFile
		s.CAFile = d.resolvePath(t.key("ca_file"), s.CAFile)
		// Checked here, where the line of the relative path as written is known.
		if msg := checkCABundle(s.CAFile); msg != "" {
			d.issue(t.key("ca_file"), written, "%s (%s)", msg, s.CAFile)
		}
	}
	t.str("proxy", &s.Proxy)
	t.str("image", &s.Image)
	t.bool("allow_shell_jobs", &s.AllowShellJobs)
}

func (d *decoder) readToken(t *table, s *Source) {
	path, err := expandHome(s.TokenFile)
	if err != nil {
		d.issue(t.key("token_file"), s.TokenFile, "%v", err)
		return
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(d.dir, path)
	}
	s.TokenFile = path
	data, err := os.ReadFile(path)
	if err != nil {
		d.issue(t.key("token_file"), path, "cannot read the token file: %v; check the path and that berth's user may read it", unwrapPathError(err))
		return
	}
	s.Token = strings.TrimSpace(string(data))
	if s.Token == "" {
		d.issue(t.key("token_file"), path, "the token file is empty; put the runner authentication token in it")
	}
}

func (d *decoder) autoscaler(t *table, a *Autoscaler) {
	t.str("provider", &a.Provider)
	t.str("provider_path", &a.ProviderPath)
	t.str("plugin_dir", &a.PluginDir)
	t.duration("plugin_call_timeout", &a.PluginCallTimeout)
	t.duration("plugin_backoff_reset", &a.PluginBackoffReset)
	t.duration("reset_timeout", &a.ResetTimeout)
	if pt := t.sub("provider_config"); pt != nil {
		// The provider owns these keys; mark them all as used.
		for k := range pt.m {
			pt.used[k] = true
		}
		b, err := json.Marshal(pt.m)
		if err != nil {
			d.issue(pt.path, nil, "cannot be passed to the provider as JSON: %v", err)
		} else {
			a.ProviderConfig = b
		}
	}
	t.int("capacity_per_instance", &a.CapacityPerInstance)
	t.int("max_instances", &a.MaxInstances)
	t.int("max_use_count", &a.MaxUseCount)
	t.str("instance_ready_command", &a.InstanceReadyCommand)
	t.duration("instance_acquire_timeout", &a.InstanceAcquireTimeout)
	t.bool("delete_instances_on_shutdown", &a.DeleteInstancesOnShutdown)
	t.str("unknown_instances", &a.UnknownInstances)
	t.bool("delete_instance_on_dead_job", &a.DeleteInstanceOnDeadJob)
	t.duration("environment_ttl", &a.EnvironmentTTL)
	t.duration("environment_evict_after", &a.EnvironmentEvictAfter)
	t.duration("heartbeat_interval", &a.HeartbeatInterval)
	t.int("failure_threshold", &a.FailureThreshold)
	t.float("suspended_cost", &a.SuspendedCost)
	if st := t.sub("scale_throttle"); st != nil {
		st.float("limit", &a.ScaleThrottle.Limit)
		st.int("burst", &a.ScaleThrottle.Burst)
		st.finish()
	}
	if pts, present := t.tables("policy"); present && len(pts) > 0 {
		a.Policies = nil
		for _, pt := range pts {
			a.Policies = append(a.Policies, d.period(pt))
			d.origin.policyPaths = append(d.origin.policyPaths, pt.path)
		}
	}
	t.finish()
}

func (d *decoder) period(t *table) policy.Period {
	p := DefaultPolicyPeriod()
	t.strings("periods", &p.Periods)
	t.str("timezone", &p.Timezone)
	t.int("idle_count", &p.Policy.IdleCount)
	t.duration("idle_time", &p.Policy.IdleTime)
	t.float("scale_factor", &p.Policy.ScaleFactor)
	t.int("scale_factor_limit", &p.Policy.ScaleFactorLimit)
	t.bool("preemptive_mode", &p.Policy.Preemptive)
	t.duration("suspended_idle_time", &p.Policy.SuspendedIdleTime)
	t.int("suspended_idle_count", &p.Policy.SuspendedIdleCount)
	t.duration("target_wait", &p.Policy.TargetWait)
	t.finish()
	return p
}

// resolvePath expands "~" and makes a path relative to the config file's
// directory absolute, as for state_dir.
func (d *decoder) resolvePath(key, p string) string {
	if p == "" {
		return ""
	}
	exp, err := expandHome(p)
	if err != nil {
		d.issue(key, p, "%v", err)
		return p
	}
	if !filepath.IsAbs(exp) {
		exp = filepath.Join(d.dir, exp)
	}
	return filepath.Clean(exp)
}

func (d *decoder) resolveStateDir(dir string) string {
	if dir == "" {
		return "" // reported by check
	}
	exp, err := expandHome(dir)
	if err != nil {
		d.issue("state_dir", dir, "%v", err)
		return dir
	}
	if !filepath.IsAbs(exp) {
		exp = filepath.Join(d.dir, exp)
	}
	return filepath.Clean(exp)
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// redact keeps tokens out of error messages.
func redact(key string, v any) any {
	if key == "token" || key == "secret_key" || key == "password" {
		return "<redacted>"
	}
	return v
}

// tomlType names the TOML type of a decoded value for messages.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// render writes a decoded value back in TOML-like syntax, shortened, for
// the "key = value" part of a message.
func render(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = strconv.Quote(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	case time.Time:
		s = x.Format(time.RFC3339)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = render(e)
		}
		s = "[" + strings.Join(parts, ", ") + "]"
	case map[string]any, []map[string]any:
		s = "{...}"
	default:
		s = fmt.Sprint(x)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// suggest returns the known key closest to k when it is plausibly a typo.
func suggest(k string, known []string) string {
	best, bestD := "", 3
	for _, c := range known {
		if d := editDistance(strings.ToLower(k), c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		// A different word order or separator: "instances_max", "max-instances".
		norm := strings.ReplaceAll(strings.ToLower(k), "-", "_")
		for _, c := range known {
			if norm == c {
				return c
			}
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99 // not worth it, and keeps fuzzing fast
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
