package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-ci/berth/policy"
)

// checker collects semantic problems. It works on the typed Config so that
// Validate can re-check a Config after flags changed it; origin, when
// present, supplies the file, lines and values as written.
type checker struct {
	o        *origin
	issues   []Issue
	warnings []Issue
}

func (k *checker) report(warn bool, path string, value any, format string, args ...any) {
	is := Issue{Key: path, Message: fmt.Sprintf(format, args...)}
	if value != nil {
		is.Value = renderTyped(value)
	}
	if k.o != nil {
		// Blame the file only when the value is the one it holds: after
		// Validate is called on a Config changed by flags, a bad value came
		// from the command line and the file's line would mislead.
		w, inFile := k.o.written[path]
		if value == nil || (inFile && sameValue(w.raw, value)) {
			is.File = k.o.file
			is.Line = k.o.lines.line(path)
			if inFile {
				is.Value = w.text
			}
		}
	}
	if warn {
		k.warnings = append(k.warnings, is)
	} else {
		k.issues = append(k.issues, is)
	}
}

// sameValue reports whether a decoded TOML value equals a typed Config value.
func sameValue(raw, typed any) bool {
	switch t := typed.(type) {
	case int:
		r, ok := raw.(int64)
		return ok && r == int64(t)
	case float64:
		switch r := raw.(type) {
		case float64:
			return r == t || (math.IsNaN(r) && math.IsNaN(t))
		case int64:
			return float64(r) == t
		}
		return false
	case time.Duration:
		r, ok := raw.(string)
		if !ok {
			return false
		}
		d, err := time.ParseDuration(strings.TrimSpace(r))
		return err == nil && d == t
	case string:
		r, ok := raw.(string)
		return ok && r == t
	case bool:
		r, ok := raw.(bool)
		return ok && r == t
	}
	return true
}

func (k *checker) fail(path string, value any, format string, args ...any) {
	k.report(false, path, value, format, args...)
}

func (k *checker) warn(path string, value any, format string, args ...any) {
	k.report(true, path, value, format, args...)
}

func renderTyped(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case time.Duration:
		return strconv.Quote(x.String())
	default:
		return render(v)
	}
}

var providerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

var (
	logLevels  = []string{"debug", "info", "warn", "error"}
	logFormats = []string{"text", "json"}
)

// check returns the problems (errors) and doubts (warnings) in c.
func (c *Config) check() (issues, warnings []Issue) {
	k := &checker{o: c.origin}

	if host, port, err := net.SplitHostPort(c.Listen); err != nil {
		k.fail("listen", c.Listen, "must be host:port, e.g. %q or \":8765\" for all interfaces", DefaultListen)
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 || strings.ContainsAny(host, " /") {
		k.fail("listen", c.Listen, "must be host:port with a port from 0 to 65535, e.g. %q", DefaultListen)
	}
	c.checkListenSecurity(k)
	if c.StateDir == "" {
		k.fail("state_dir", c.StateDir, "must not be empty; remove the key to use the default %s", "~/.local/state/berth")
	}
	if !contains(logLevels, c.LogLevel) {
		k.fail("log_level", c.LogLevel, "must be one of %s", quoteList(logLevels))
	}
	if !contains(logFormats, c.LogFormat) {
		k.fail("log_format", c.LogFormat, "must be one of %s", quoteList(logFormats))
	}
	if c.JobRetention < 0 {
		k.fail("job_retention", c.JobRetention, `must be 0 (keep for ever) or positive, e.g. "720h"`)
	}
	if c.LogRetention < 0 {
		k.fail("log_retention", c.LogRetention, `must be 0 (keep as long as the job) or positive, e.g. "168h"`)
	}
	if c.JobTimeout <= 0 {
		k.fail("job_timeout", c.JobTimeout, `must be positive, e.g. "1h"`)
	}
	if c.ShutdownTimeout < 0 {
		k.fail("shutdown_timeout", c.ShutdownTimeout, `must be 0 (cancel running jobs at once) or more, e.g. "5m"`)
	}
	c.checkSources(k)
	c.checkAutoscaler(k)
	c.checkHA(k)

	sortIssues(k.issues)
	sortIssues(k.warnings)
	return k.issues, k.warnings
}

func (c *Config) sourcePath(i int) string {
	if c.origin != nil && i < len(c.origin.sourcePaths) {
		return c.origin.sourcePaths[i]
	}
	return "source[" + strconv.Itoa(i) + "]"
}

func (c *Config) policyPath(i int) string {
	if c.origin != nil && i < len(c.origin.policyPaths) {
		return c.origin.policyPaths[i]
	}
	return "autoscaler.policy[" + strconv.Itoa(i) + "]"
}

func (c *Config) checkSources(k *checker) {
	if len(c.Sources) == 0 {
		k.fail("source", nil, "no job source; remove the key to use the built-in queue, or add [source] kind = %q", SourceQueue)
	}
	queues := 0
	for i, s := range c.Sources {
		p := c.sourcePath(i)
		switch s.Kind {
		case SourceQueue:
			queues++
			if queues == 2 {
				k.fail(p+".kind", s.Kind, "only one queue source is possible: the built-in queue is served once, on listen; remove this one")
			}
		case SourceGitLab:
			c.checkGitLab(k, p, s)
		default:
			k.fail(p+".kind", s.Kind, "unknown source kind; use %q or %q", SourceQueue, SourceGitLab)
		}
	}
}

// registrationTokenPrefix starts GitLab's runner registration tokens, the
// deprecated kind `gitlab-runner register --registration-token` takes. Jobs
// are requested with a runner authentication token (glrt-…) instead.
const registrationTokenPrefix = "GR1348941"

func (c *Config) checkGitLab(k *checker, p string, s Source) {
	if s.URL == "" {
		k.fail(p+".url", nil, `a gitlab source needs url, the address of your GitLab, e.g. url = "https://gitlab.com"`)
	} else if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		k.fail(p+".url", s.URL, `must be an http or https URL such as "https://gitlab.example.com"`)
	} else if base, ok := strings.CutSuffix(strings.TrimRight(s.URL, "/"), "/api/v4"); ok {
		k.fail(p+".url", s.URL, "is GitLab's API address; give the server without /api/v4 (url = %q): berth adds the API path itself", base)
	}
	if s.Token == "" && s.TokenFile == "" {
		k.fail(p+".token", nil, "a gitlab source needs a runner authentication token: set token_file to a file holding it (or token)")
	} else if strings.HasPrefix(s.Token, registrationTokenPrefix) {
		key := p + ".token"
		if s.TokenFile != "" {
			key = p + ".token_file"
		}
		k.fail(key, nil, "holds a registration token (%s…), which `gitlab-runner register` exchanges for a runner and berth cannot use: "+
			"create a runner in GitLab (Settings > CI/CD > Runners > New project runner) and give berth its authentication token, which starts with glrt-",
			registrationTokenPrefix)
	}
	if s.RequestConcurrency < 1 {
		k.fail(p+".request_concurrency", s.RequestConcurrency, "must be at least 1")
	}
	if s.CheckInterval <= 0 {
		k.fail(p+".check_interval", s.CheckInterval, `must be positive, e.g. "3s"`)
	}
	checkGitLabHTTP(k, p, s)
}

func (c *Config) checkAutoscaler(k *checker) {
	a := &c.Autoscaler
	const p = "autoscaler."
	if !providerName.MatchString(a.Provider) {
		k.fail(p+"provider", a.Provider, `must be "local", "sim" or a plugin NAME (binary berth-provider-NAME): letters, digits, "-", "_" or "."`)
	} else if c.providerCheck != nil && (a.ProviderPath == "" || filepath.IsAbs(a.ProviderPath)) {
		name := a.Provider
		if a.ProviderPath != "" {
			name = a.ProviderPath
		}
		for _, pr := range c.providerCheck(name, a.PluginDir, a.ProviderConfig) {
			switch {
			case pr.Warning:
				k.warn(p+"provider_config", nil, "%s", pr.Message)
			case pr.Name && a.ProviderPath != "":
				k.fail(p+"provider_path", a.ProviderPath, "%s", pr.Message)
			case pr.Name:
				k.fail(p+"provider", a.Provider, "%s", pr.Message)
			case pr.Key == "":
				k.fail(p+"provider_config", nil, "%s", pr.Message)
			default:
				k.fail(p+"provider_config."+pr.Key, nil, "%s", pr.Message)
			}
		}
	}
	if a.ProviderPath != "" && !filepath.IsAbs(a.ProviderPath) {
		k.fail(p+"provider_path", a.ProviderPath, "must be an absolute path to a provider plugin binary")
	}
	if a.PluginDir != "" && !filepath.IsAbs(a.PluginDir) {
		k.fail(p+"plugin_dir", a.PluginDir, "must be an absolute path to the directory of berth-provider-NAME binaries")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"plugin_call_timeout", a.PluginCallTimeout}, {"plugin_backoff_reset", a.PluginBackoffReset}, {"reset_timeout", a.ResetTimeout}} {
		if d.v < 0 {
			k.fail(p+d.key, d.v, `must be positive, e.g. "1m" (or left out for the default)`)
		}
	}
	if a.CapacityPerInstance < 1 {
		k.fail(p+"capacity_per_instance", a.CapacityPerInstance, "must be at least 1")
	}
	if a.MaxInstances < 1 {
		k.fail(p+"max_instances", a.MaxInstances, "must be at least 1")
	}
	if a.MaxUseCount < 0 {
		k.fail(p+"max_use_count", a.MaxUseCount, "must be 0 (unlimited) or more")
	}
	if a.InstanceAcquireTimeout <= 0 {
		k.fail(p+"instance_acquire_timeout", a.InstanceAcquireTimeout, `must be positive, e.g. "15m"`)
	}
	if a.UnknownInstances != UnknownInstancesAdopt && a.UnknownInstances != UnknownInstancesDelete {
		k.fail(p+"unknown_instances", a.UnknownInstances, "must be %q or %q", UnknownInstancesAdopt, UnknownInstancesDelete)
	}
	if a.EnvironmentTTL <= 0 {
		k.fail(p+"environment_ttl", a.EnvironmentTTL, `must be positive, e.g. "168h": a suspended environment kept for ever would hold its instance for ever`)
	}
	if a.EnvironmentEvictAfter < 0 {
		k.fail(p+"environment_evict_after", a.EnvironmentEvictAfter, `must be "0s" (never evict a parked environment) or positive, e.g. "1h"`)
	}
	if a.HeartbeatInterval < 0 {
		k.fail(p+"heartbeat_interval", a.HeartbeatInterval, `must be "0s" (no heartbeats) or positive, e.g. "30s"`)
	}
	if !(a.SuspendedCost >= 0 && a.SuspendedCost <= 1) {
		k.fail(p+"suspended_cost", a.SuspendedCost, "must be between 0 and 1: the cost of a suspended second relative to a running one (0 = the default 0.1)")
	}
	if a.FailureThreshold < 1 {
		k.fail(p+"failure_threshold", a.FailureThreshold, "must be at least 1")
	}
	if l := a.ScaleThrottle.Limit; !(l > 0) || math.IsInf(l, 0) {
		k.fail(p+"scale_throttle.limit", l, "must be a positive number of instances per second, e.g. 100")
	}
	if a.ScaleThrottle.Burst < 1 {
		k.fail(p+"scale_throttle.burst", a.ScaleThrottle.Burst, "must be at least 1, or no instance could ever be requested")
	}
	if len(a.ProviderConfig) > 0 && (len(a.ProviderConfig) < 2 || a.ProviderConfig[0] != '{') {
		k.fail(p+"provider_config", nil, "must be a JSON object")
	}
	if len(a.Policies) == 0 {
		k.fail(p+"policy", nil, "no policy period; remove the key to use the default, or add one [[autoscaler.policy]]")
	}
	if c.origin != nil && len(c.origin.policyPaths) == 1 && c.origin.policyPaths[0] == p+"policy" {
		// TOML makes [autoscaler.policy] one table, [[autoscaler.policy]] an
		// array of them. One table is unambiguous, so berth accepts it, but
		// says so: a second [autoscaler.policy] below it would be a TOML
		// error, and readers of the docs expect double brackets.
		k.warn(p+"policy", nil, "written as a single table [autoscaler.policy]: berth reads it as one policy period that applies at all times it lists; "+
			"write [[autoscaler.policy]] (double brackets) to be able to add more periods")
	}
	slots := a.MaxInstances * a.CapacityPerInstance
	for i, per := range a.Policies {
		c.checkPeriod(k, c.policyPath(i), per, slots)
	}
}

// queueOnly reports whether every job source is the built-in queue, whose
// queued jobs count as demand.
func (c *Config) queueOnly() bool {
	for _, s := range c.Sources {
		if s.Kind != SourceQueue {
			return false
		}
	}
	return true
}

func (c *Config) checkPeriod(k *checker, pp string, per policy.Period, slots int) {
	if err := per.Validate(); err != nil {
		var errs []error
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		} else {
			errs = []error{err}
		}
		for _, e := range errs {
			var fe *policy.FieldError
			if !errors.As(e, &fe) {
				k.fail(pp, nil, "%v", e)
				continue
			}
			key := pp + "." + fe.Field
			if fe.Item >= 0 {
				key += "[" + strconv.Itoa(fe.Item) + "]"
			}
			k.fail(key, periodValue(per, fe.Field, fe.Item), "%v", fe.Err)
		}
	}
	pol := per.Policy
	// In preemptive mode a job is booked only against an idle slot on a ready
	// instance. With idle_count = 0 nothing but known demand starts an
	// instance from an empty fleet (scale_factor multiplies slots already in
	// use, which stay 0). The built-in queue reports its queued jobs as
	// demand; a GitLab source cannot, so its jobs would wait for ever. That
	// is a deadlock, not a preference: reject it rather than warn.
	if pol.Preemptive && pol.IdleCount == 0 && !c.queueOnly() {
		k.fail(pp+".idle_count", 0,
			"with preemptive_mode = true and a GitLab source no instance would ever start and its jobs would wait for ever; "+
				"set idle_count to 1 or more, or preemptive_mode = false to start instances on demand "+
				"(the built-in queue alone works with idle_count = 0: its queued jobs start instances)")
	}
	if pol.SuspendedIdleCount > 0 && pol.SuspendedIdleTime == 0 && pol.TargetWait == 0 {
		k.warn(pp+".suspended_idle_count", pol.SuspendedIdleCount,
			"has no effect without the suspended tier; set suspended_idle_time (or target_wait) to keep suspended idle instances")
	}
	if pol.ScaleFactor > 0 && pol.ScaleFactorLimit == 0 {
		k.warn(pp+".scale_factor", pol.ScaleFactor,
			"has no effect while scale_factor_limit = 0 (the idle target is min(scale_factor × in use, scale_factor_limit)); set scale_factor_limit")
	}
	if slots > 0 && pol.IdleCount > slots {
		k.warn(pp+".idle_count", pol.IdleCount,
			"exceeds max_instances × capacity_per_instance = %d slots; the idle pool will be capped there", slots)
	}
}

// periodValue returns the typed value of a period field named by a
// policy.FieldError, for messages.
func periodValue(per policy.Period, field string, item int) any {
	switch field {
	case "periods":
		if item >= 0 && item < len(per.Periods) {
			return per.Periods[item]
		}
		return nil
	case "timezone":
		return per.Timezone
	case "idle_count":
		return per.Policy.IdleCount
	case "idle_time":
		return per.Policy.IdleTime
	case "scale_factor":
		return per.Policy.ScaleFactor
	case "scale_factor_limit":
		return per.Policy.ScaleFactorLimit
	case "suspended_idle_time":
		return per.Policy.SuspendedIdleTime
	case "suspended_idle_count":
		return per.Policy.SuspendedIdleCount
	case "target_wait":
		return per.Policy.TargetWait
	}
	return nil
}

// sortIssues orders issues by line; those without a line keep their order
// at the end.
func sortIssues(is []Issue) {
	sort.SliceStable(is, func(i, j int) bool {
		li, lj := is[i].Line, is[j].Line
		if li == 0 {
			return false
		}
		return lj == 0 || li < lj
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// checkListenSecurity refuses to send API tokens in clear text over a
// network: a listen address beyond loopback needs TLS or an explicit
// insecure_listen = true.
func (c *Config) checkListenSecurity(k *checker) {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		// Name the key that is set: its line is the one to look at. Only
		// the file sets these keys, so its line and text are the ones to show.
		key := "tls_cert_file"
		if c.TLSCertFile == "" {
			key = "tls_key_file"
		}
		k.fail(key, nil, "tls_cert_file and tls_key_file go together: set both (PEM certificate and its key) or neither")
		return
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil || c.TLSCertFile != "" || c.InsecureListen || IsLoopbackHost(host) {
		return
	}
	k.fail("listen", c.Listen, "is reachable beyond this machine, and API tokens would cross the network in clear text: "+
		"set tls_cert_file and tls_key_file, or insecure_listen = true if a TLS proxy or a private network protects it, or listen on 127.0.0.1")
}

// IsLoopbackHost reports whether a listen host only accepts connections from
// this machine: "localhost" or a loopback IP. An empty host means every
// interface.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
