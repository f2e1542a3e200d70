// Package runnerimport turns gitlab-runner's config.toml into a berth.toml
// (`berth config import`, docs/configuration.md "Coming from GitLab Runner").
//
// Each [[runners]] becomes a GitLab [[source]]; [runners.autoscaler] (the
// docker-autoscaler and instance executors) or [runners.machine]
// (docker+machine) becomes [autoscaler] with its policies; the fleeting
// plugin's plugin_config and connector_config become the berth provider's
// provider_config; [runners.cache.s3] becomes [cache]; [runners.docker]'s
// image settings become [images]. Every key without an equivalent is kept
// as a comment that says why and what to do instead. Runner tokens are
// never written into the output: they go to token files, which the source
// names with token_file.
//
// berth runs one fleet per process, shared by all its sources. Runners with
// the same autoscaler become sources of one berth; a runner with another
// autoscaler is named in a comment, with how to import it into a second
// berth (Options.Runner).
package runnerimport

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Options change what Import writes.
type Options struct {
	// Runner names the runner (its name) whose autoscaler the berth file
	// gets; empty means the first runner's.
	Runner string
	// TokenDir is the directory token files are named in (absolute);
	// Import does not write them, Result.Tokens lists them.
	TokenDir string
}

// Result is an imported configuration.
type Result struct {
	// TOML is the berth.toml text.
	TOML string
	// Tokens are the runner tokens to write, each to its own file; the
	// output names the file, never the token.
	Tokens []TokenFile
	// Notes are what the user should know beyond the comments in TOML,
	// one sentence each (a runner left out, a token that cannot work).
	Notes []string
}

// TokenFile is one runner token and where it goes.
type TokenFile struct {
	Path   string
	Token  string
	Runner string
}

// runner is one [[runners]] entry.
type runner struct {
	t        *tbl
	name     string
	executor string
	fleet    string // what identifies its autoscaler; equal fleets share a berth
}

// Import reads gitlab-runner's config.toml (data; name is used in messages)
// and returns the berth configuration doing the same.
func Import(data []byte, name string, opts Options) (*Result, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, fmt.Errorf("%s is not valid TOML: %w", name, err)
	}
	root := newTbl("", raw)
	runners := parseRunners(root)
	if len(runners) == 0 {
		return nil, fmt.Errorf("%s has no [[runners]]: give gitlab-runner's config.toml (usually /etc/gitlab-runner/config.toml)", name)
	}
	sel, err := selectRunner(runners, opts.Runner)
	if err != nil {
		return nil, err
	}
	im := &importer{opts: opts, res: &Result{}, top: &block{}}
	im.top.note("berth.toml imported by `berth config import` from %s (gitlab-runner).", filepath.Base(name))
	im.top.note("Check it with `berth config check FILE`. Comments \"runners.KEY = VALUE: ...\" are settings of the old")
	im.top.note("file berth does not take, with why and what to do instead.")
	im.globals(root)

	var fleet []*runner
	for _, r := range runners {
		if r.fleet == sel.fleet {
			fleet = append(fleet, r)
		}
	}
	for i, r := range fleet {
		im.source(root, r, i == 0)
	}
	im.autoscaler(sel, fleet)
	im.others(name, runners, sel)

	var sb strings.Builder
	im.top.write(&sb)
	for _, b := range append(im.blocks, im.shared...) {
		b.write(&sb)
	}
	if im.tail != nil {
		im.tail.write(&sb)
	}
	im.res.TOML = sb.String()
	return im.res, nil
}

func parseRunners(root *tbl) []*runner {
	var out []*runner
	for i, t := range root.subs("runners") {
		r := &runner{t: t, name: t.str("name"), executor: t.str("executor")}
		if r.name == "" {
			r.name = "runner-" + strconv.Itoa(i+1)
		}
		r.fleet = fleetKey(t)
		out = append(out, r)
	}
	return out
}

// fleetKey identifies what a runner's autoscaler creates: the executor,
// the plugin or machine driver and their settings. Runners with equal keys
// scale one fleet, which one berth can serve to all of them.
func fleetKey(t *tbl) string {
	executor, _ := t.m["executor"].(string)
	parts := []string{strings.ToLower(executor)}
	if a, ok := t.m["autoscaler"].(map[string]any); ok {
		plugin, _ := a["plugin"].(string)
		pc, _ := json.Marshal(a["plugin_config"])
		cc, _ := json.Marshal(a["connector_config"])
		parts = append(parts, provider(plugin), string(pc), string(cc))
	}
	if m, ok := t.m["machine"].(map[string]any); ok {
		mc, _ := json.Marshal(m)
		parts = append(parts, string(mc))
	}
	return strings.Join(parts, "\x00")
}

func selectRunner(runners []*runner, name string) (*runner, error) {
	if name == "" {
		return runners[0], nil
	}
	var names []string
	for _, r := range runners {
		if r.name == name {
			return r, nil
		}
		names = append(names, strconv.Quote(r.name))
	}
	return nil, fmt.Errorf("no runner is named %q; the file has %s", name, strings.Join(names, ", "))
}

// importer collects the blocks of the berth file being written.
type importer struct {
	opts   Options
	res    *Result
	top    *block
	blocks []*block
	// shared are [cache] and [images], written after the sources and the
	// autoscaler: one for every source.
	shared []*block
	tail   *block // the runners left out, last
	// tokenNames are the token files named so far.
	tokenNames map[string]bool
}

func (im *importer) add(header string) *block {
	b := &block{header: header}
	im.blocks = append(im.blocks, b)
	return b
}

func (im *importer) notef(format string, args ...any) {
	im.res.Notes = append(im.res.Notes, fmt.Sprintf(format, args...))
}

// globals maps the top-level keys: log settings and shutdown_timeout.
// check_interval belongs to each source and is taken there.
func (im *importer) globals(root *tbl) {
	b := im.top
	switch lvl := root.str("log_level"); lvl {
	case "":
	case "debug", "info", "warn", "error":
		b.set("log_level", lvl)
	case "warning":
		b.set("log_level", "warn")
	default: // fatal, panic
		b.set("log_level", "error")
		b.note("log_level = %s in GitLab: berth's quietest level is \"error\"", quote(lvl))
	}
	switch f := root.str("log_format"); f {
	case "json":
		b.set("log_format", "json")
	case "", "runner", "text":
	default:
		b.note("log_format = %s: berth writes \"text\" or \"json\"", quote(f))
	}
	if v, ok := root.take("shutdown_timeout"); ok {
		if secs, ok := v.(int64); ok && secs > 0 {
			b.set("shutdown_timeout", (time.Duration(secs) * time.Second).String())
		} else {
			b.note("shutdown_timeout = %s: gitlab-runner's default, 30 s; berth gives running jobs 5m by default after the first SIGTERM "+
				"(a duration here: shutdown_timeout = \"30s\" keeps GitLab's)", value(v))
		}
	}
	root.take("check_interval") // per source
	root.take("runners")
	root.rest(b)
}

// source writes the [[source]] of runner r.
func (im *importer) source(root *tbl, r *runner, first bool) {
	t := r.t
	b := im.add("[[source]]")
	b.note("GitLab runner %s (executor %s)", quote(r.name), r.executor)
	b.set("kind", "gitlab")
	u := t.str("url")
	if base, ok := strings.CutSuffix(strings.TrimRight(u, "/"), "/api/v4"); ok {
		u = base
	}
	b.set("url", strings.TrimRight(u, "/"))
	im.token(b, r, t.str("token"))
	if v, ok := root.m["check_interval"].(int64); ok && v > 0 {
		b.set("check_interval", (time.Duration(v) * time.Second).String())
	}
	for _, k := range []string{"request_concurrency", "output_limit"} {
		if v, ok := t.take(k); ok {
			if n, ok := v.(int64); ok && n > 0 {
				b.set(k, n)
			}
		}
	}
	if v := t.str("builds_dir"); v != "" {
		b.set("builds_dir", v)
	}
	if v := t.str("tls-ca-file"); v != "" {
		b.set("ca_file", v)
	}
	t.take("name")
	t.take("executor")
	if d := t.sub("docker"); d != nil {
		im.docker(b, r, d, first)
	}
	if c := t.sub("cache"); c != nil {
		if first {
			im.cache(c)
		} else {
			b.note("runners.cache: berth keeps one [cache] for every source; the first runner's is used")
		}
	}
	t.take("autoscaler") // the fleet's, written once
	t.take("machine")
	t.rest(b)
}

// registrationPrefix starts GitLab's deprecated registration tokens, which
// cannot request jobs.
const registrationPrefix = "GR1348941"

// token names the token file of r in the source and queues the file.
func (im *importer) token(b *block, r *runner, token string) {
	if token == "" {
		b.note("token: the runner has none in the file; put its authentication token (glrt-...) in a file and set token_file")
		return
	}
	name := tokenFileName(r.name)
	for i := 2; im.tokenNames[name]; i++ { // two runners of one name
		name = strings.TrimSuffix(tokenFileName(r.name), ".token") + "-" + strconv.Itoa(i) + ".token"
	}
	if im.tokenNames == nil {
		im.tokenNames = map[string]bool{}
	}
	im.tokenNames[name] = true
	path := filepath.Join(im.opts.TokenDir, name)
	b.set("token_file", path)
	im.res.Tokens = append(im.res.Tokens, TokenFile{Path: path, Token: token, Runner: r.name})
	if strings.HasPrefix(token, registrationPrefix) {
		im.notef("runner %q has a registration token (%s...), which berth cannot use: create a runner in GitLab "+
			"(Settings > CI/CD > Runners > New project runner) and write its glrt- token to %s", r.name, registrationPrefix, path)
	}
}

var unsafeName = regexp.MustCompile(`[^a-z0-9._-]+`)

func tokenFileName(runner string) string {
	n := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(runner), "-"), "-.")
	if n == "" {
		n = "runner"
	}
	return "gitlab-" + n + ".token"
}

// docker maps [runners.docker]: the default image goes to the source, the
// pull settings to [images] (from the first runner only: berth has one).
func (im *importer) docker(src *block, r *runner, d *tbl, first bool) {
	if img := d.str("image"); img != "" {
		src.set("image", img) // jobs that name no image run in it, as in the docker executor
	}
	imgs := &block{header: "[images]"}
	if v, ok := d.take("pull_policy"); ok {
		pols := stringsOf(v)
		if len(pols) > 0 {
			imgs.set("pull_policy", pols[0])
			if len(pols) > 1 {
				imgs.note("pull_policy = %s in GitLab: berth pulls with one policy, the first", value(v))
			}
		}
	}
	for _, k := range []string{"allowed_images", "allowed_pull_policies"} {
		if v, ok := d.take(k); ok {
			imgs.set(k, stringsOf(v))
		}
	}
	if v, ok := d.take("wait_for_services_timeout"); ok {
		if n, ok := v.(int64); ok {
			imgs.set("wait_for_services_timeout", n)
		}
	}
	if first {
		if !imgs.empty() {
			im.shared = append(im.shared, imgs)
		}
	} else if !imgs.empty() {
		src.note("runners.docker pull settings: berth has one [images] for every source; the first runner's is used")
	}
	d.rest(src)
}

func stringsOf(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// cache maps [runners.cache] with [runners.cache.s3] to [cache].
func (im *importer) cache(c *tbl) {
	b := &block{header: "[cache]"}
	im.shared = append(im.shared, b)
	typ := strings.ToLower(c.str("Type"))
	if p := c.str("Path"); p != "" {
		b.set("prefix", p)
	}
	s3 := c.sub("s3")
	switch {
	case typ == "s3" && s3 != nil:
		addr := s3.str("ServerAddress")
		if addr == "" {
			addr = "s3.amazonaws.com"
		}
		b.set("s3_endpoint", addr)
		b.set("bucket", s3.str("BucketName"))
		if v := s3.str("BucketLocation"); v != "" {
			b.set("region", v)
		}
		if v := s3.str("AccessKey"); v != "" {
			b.set("access_key", v)
		}
		if v := s3.str("SecretKey"); v != "" {
			b.set("secret_key", v)
			im.notef("the S3 secret key of the cache is in the output, as it was in config.toml: keep the file readable by berth's user only (chmod 600)")
		}
		if v, ok := s3.take("Insecure"); ok && v == true {
			b.set("insecure", true)
		}
		s3.rest(b)
	case typ != "":
		b.note("Type = %s: berth keeps caches in a directory (dir, the default: <state_dir>/cache) or an S3-compatible bucket; "+
			"the caches now stay in the directory (Google Cloud Storage answers S3 at storage.googleapis.com with HMAC keys)", quote(typ))
	}
	for _, k := range []string{"gcs", "azure"} {
		// The settings of another cache type than Type are not in use.
		if s := c.sub(k); s != nil && typ == k {
			s.rest(b)
		}
	}
	c.rest(b)
}

// others names the runners whose autoscaler differs from the one written,
// with how to give each its own berth.
func (im *importer) others(file string, runners []*runner, sel *runner) {
	var b *block
	for _, r := range runners {
		if r.fleet == sel.fleet {
			continue
		}
		if b == nil {
			b = &block{}
			im.tail = b
			b.lines = append(b.lines, "")
			b.note("Runners with another autoscaler. berth scales one fleet per berth process, shared by its sources;")
			b.note("these runners' fleets need a berth each. Import one with")
			b.note("  berth config import --runner NAME %s > berth-NAME.toml", filepath.Base(file))
			b.note("then give that file its own listen (e.g. \"127.0.0.1:8766\") and state_dir, and run it as a second")
			b.note("service (berth run --config berth-NAME.toml).")
		}
		b.note("- runner %s (executor %s)", quote(r.name), r.executor)
		im.notef("runner %q uses another autoscaler than %q: berth runs one fleet per process; import it into a second berth with --runner %q", r.name, sel.name, r.name)
	}
}
