// Package config reads berth's TOML configuration (docs/config.md, "Configuration
// (contract)") into a validated Config.
//
// Every problem is reported with the file, line and key it concerns and what
// to do about it, for example
//
//	berth.toml:12: autoscaler.max_instances = 0: must be at least 1
//
// and all problems are reported at once, so a user fixes a file in one pass.
// Syntax errors, unknown keys (with a "did you mean" hint), wrong types and
// semantic errors are all rejected; questionable but workable settings are
// returned as Config.Warnings for the daemon to log.
//
// Running with no file at all is supported: Default returns the built-in
// queue, the local provider and the documented defaults.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/berth-ci/berth/policy"
)

// Defaults from docs/config.md. They are constants so that docs, tests and the CLI
// can refer to them.
const (
	DefaultListen          = "127.0.0.1:8765"
	DefaultMaxConnections  = 512
	DefaultLogLevel        = "info"
	DefaultLogFormat       = "text"
	DefaultJobTimeout      = time.Hour
	DefaultShutdownTimeout = 5 * time.Minute
	DefaultOutputLimitKiB  = 4096
	// DefaultJobRetention keeps finished jobs of the built-in queue 30 days.
	DefaultJobRetention = 30 * 24 * time.Hour
	// DefaultLogRetention keeps finished jobs' logs 7 days.
	DefaultLogRetention           = 7 * 24 * time.Hour
	DefaultProvider               = "local"
	DefaultCapacityPerInstance    = 1
	DefaultMaxInstances           = 10
	DefaultInstanceAcquireTimeout = 15 * time.Minute
	DefaultEnvironmentTTL         = 168 * time.Hour
	DefaultEnvironmentEvictAfter  = time.Hour
	DefaultHeartbeatInterval      = 30 * time.Second
	DefaultFailureThreshold       = 3
	DefaultScaleThrottleLimit     = 100
	DefaultScaleThrottleBurst     = 10
	DefaultRequestConcurrency     = 4
	DefaultCheckInterval          = 3 * time.Second
	DefaultIdleCount              = 1
	DefaultIdleTime               = 20 * time.Minute
	DefaultPeriod                 = "* * * * *"
	DefaultTimezone               = "UTC"
)

// Job source kinds (the "kind" key of a [source] table).
const (
	// SourceQueue is the built-in job queue served on Config.Listen.
	SourceQueue = "queue"
	// SourceGitLab polls a GitLab instance through the runner API v4.
	SourceGitLab = "gitlab"
)

// What to do with instances the provider lists but the state store does not
// know (Autoscaler.UnknownInstances). Never ignoring them is a rule of docs/semantics.md.
const (
	UnknownInstancesAdopt  = "adopt"
	UnknownInstancesDelete = "delete"
)

// Config is berth's whole configuration. Durations are plain time.Duration
// (the file spells them "15m"); paths are absolute.
type Config struct {
	// File is the path Load read, or the name given to Parse; empty for Default.
	File string

	// Listen is the address of the HTTP API, /metrics and /healthz.
	Listen string
	// TLSCertFile and TLSKeyFile (keys tls_cert_file, tls_key_file; both or
	// neither, absolute after loading) make the API serve HTTPS.
	TLSCertFile string
	TLSKeyFile  string
	// InsecureListen (key insecure_listen) allows a listen address beyond
	// loopback without TLS, which sends API tokens in clear text.
	InsecureListen bool
	// MaxConnections (key max_connections) bounds the API's open client
	// connections; past it the longest-idle one is closed, so that idle
	// connections cannot starve berth of descriptors.
	MaxConnections int
	// StateDir holds the state store. A "~" is expanded and a relative path
	// is taken relative to the config file's directory. See DefaultStateDir
	// for the default when the key is absent.
	StateDir string
	// LogLevel is one of "debug", "info", "warn", "error".
	LogLevel string
	// LogFormat is "text" (logfmt-like key=value lines) or "json" (one
	// object per line, for log shippers).
	LogFormat string
	// JobTimeout bounds a job that does not set its own timeout (key
	// job_timeout, top level because it applies to every source).
	JobTimeout time.Duration
	// ShutdownTimeout (key shutdown_timeout) is how long running jobs may
	// go on after the first stop signal before they are canceled; a second
	// signal cancels them at once.
	ShutdownTimeout time.Duration
	// JobRetention is how long finished jobs of the built-in queue are
	// kept (key job_retention); 0 keeps them for ever.
	JobRetention time.Duration
	// LogRetention is how long finished jobs' logs are kept (key
	// log_retention); 0 keeps them as long as their job.
	LogRetention time.Duration

	// Sources are where jobs come from; several share one fleet. Written as
	// one [source] table or as [[source]] array elements. With no source in
	// the file, the built-in queue is the only one.
	Sources []Source

	// Autoscaler is the [autoscaler] table.
	Autoscaler Autoscaler
	// Cache is the [cache] table (cache.go).
	Cache Cache

	// Images is the [images] table.
	Images Images

	// HA is the [ha] table; nil without it (one manager, state in bbolt).
	HA *HA

	// Warnings are settings that work but are probably not what was meant.
	// The daemon should log each one at start.
	Warnings []Issue

	// origin remembers where keys came from, so that Validate can name lines.
	origin *origin
	// providerCheck, when set (WithProviderCheck), checks the provider name
	// and provider_config along with everything else.
	providerCheck ProviderCheck
}

// Source is one job source.
type Source struct {
	// Kind is SourceQueue or SourceGitLab.
	Kind string
	// URL of the GitLab instance (gitlab only), e.g. "https://gitlab.com".
	URL string
	// Token is the runner authentication token (gitlab only). When the file
	// uses token_file, Token holds that file's content with surrounding
	// whitespace removed, read at load time.
	Token string
	// TokenFile is the absolute path of the token file, empty when the token
	// was given inline; kept so that a reload can pick up a rotated token.
	TokenFile string
	// RequestConcurrency is how many job requests may be in flight to GitLab
	// at once (gitlab only).
	RequestConcurrency int
	// CheckInterval is how often GitLab is polled for jobs (gitlab only).
	CheckInterval time.Duration
	// BuildsDir is where GitLab jobs check out their sources on the
	// instance (gitlab only); empty means $HOME/builds there.
	BuildsDir string
	// OutputLimit caps a GitLab job's log, in bytes (gitlab only). The file
	// gives it in kilobytes (key output_limit), as gitlab-runner does.
	OutputLimit int
	// CAFile is a PEM bundle of the certificate authorities GitLab's
	// certificate is checked against (gitlab only, key ca_file, absolute
	// after loading); empty means the system's.
	CAFile string
	// Proxy is the URL of the HTTP proxy to reach GitLab through (gitlab
	// only); empty means the environment's HTTPS_PROXY, HTTP_PROXY and
	// NO_PROXY.
	Proxy string
	// Image is the image a GitLab job without image: runs in (gitlab
	// only, key image), like gitlab-runner's [runners.docker] image;
	// empty runs such jobs in the instance's shell.
	Image string
	// AllowShellJobs lets a GitLab job run in the instance's shell, with
	// no image, although [images] allowed_images is set (gitlab only, key
	// allow_shell_jobs). Without it such a job is refused: leaving image:
	// out would bypass allowed_images.
	AllowShellJobs bool
	// MaxArtifactSize caps one artifact archive of a job, in bytes (gitlab
	// only, key max_artifact_size, a size such as "1GiB"); 0 leaves the
	// limit to GitLab.
	MaxArtifactSize int64
}

// String describes the source without its token, so that a Source can be
// logged safely.
func (s Source) String() string {
	if s.Kind == SourceGitLab {
		return fmt.Sprintf("gitlab %s", s.URL)
	}
	return s.Kind
}

// Autoscaler mirrors the [autoscaler] table; see docs/semantics.md for semantics.
type Autoscaler struct {
	// Provider is "local", "sim" or the NAME of a berth-provider-NAME plugin.
	Provider string
	// ProviderConfig is [autoscaler.provider_config] as a JSON object, "{}"
	// when absent; the provider decodes it.
	ProviderConfig json.RawMessage
	// ProviderPath names a provider plugin binary directly; it overrides
	// Provider. Empty means look Provider up.
	ProviderPath string
	// PluginDir is where berth-provider-NAME binaries are looked for first;
	// empty means next to the berth binary, then $PATH.
	PluginDir string
	// PluginCallTimeout bounds every call to a provider plugin; a plugin
	// whose calls keep timing out is taken as frozen and restarted. 0 means
	// the default, 1m.
	PluginCallTimeout time.Duration
	// PluginBackoffReset is how long a plugin must have run before its
	// restart backoff starts again from the shortest wait. 0 means the
	// default, 5m.
	PluginBackoffReset time.Duration
	// ResetTimeout bounds the reset of an instance between jobs; a reset
	// that fails or times out deletes the instance. 0 means the default, 1m.
	ResetTimeout time.Duration
	// CapacityPerInstance is the number of slots per instance.
	CapacityPerInstance int
	// MaxInstances caps all instances together, suspended ones included.
	MaxInstances int
	// MaxUseCount drains an instance after this many jobs; 0 means unlimited.
	MaxUseCount int
	// InstanceReadyCommand runs on a new instance before it takes jobs; empty
	// means none.
	InstanceReadyCommand string
	// InstanceAcquireTimeout bounds waiting for a booked instance to be ready.
	InstanceAcquireTimeout time.Duration
	// DeleteInstancesOnShutdown deletes the fleet when the daemon stops.
	DeleteInstancesOnShutdown bool
	// UnknownInstances is UnknownInstancesAdopt or UnknownInstancesDelete.
	UnknownInstances string
	// DeleteInstanceOnDeadJob deletes, rather than releases, the instance of a
	// job that died with a previous berth process.
	DeleteInstanceOnDeadJob bool
	// EnvironmentTTL is how long a suspended environment is kept unresumed
	// before its instance is deleted. It must be positive: an environment
	// kept for ever pins an instance for ever.
	EnvironmentTTL time.Duration
	// EnvironmentEvictAfter: when parked environments hold every instance
	// max_instances allows and a plain job waits, the environment parked
	// longest is deleted once it has been parked this long, so plain jobs
	// do not wait until environment_ttl. 0 never evicts.
	EnvironmentEvictAfter time.Duration
	// HeartbeatInterval is how often ready instances are health-checked; 0
	// disables heartbeats.
	HeartbeatInterval time.Duration
	// FailureThreshold is how many failed heartbeats mark an instance
	// unhealthy.
	FailureThreshold int
	// ScaleThrottle rate-limits scale-up.
	ScaleThrottle ScaleThrottle
	// SuspendedCost is what a suspended instance costs per second relative
	// to a running one (0..1); target_wait sizing weighs the hot and the
	// suspended pool by it. 0 means the default, 0.1.
	SuspendedCost float64
	// Policies are the [[autoscaler.policy]] periods in file order (last
	// match wins). With none in the file (or an empty array), one default
	// period applies: DefaultPolicyPeriod.
	Policies []policy.Period
}

// ScaleThrottle limits how fast instances are requested, as a token bucket.
type ScaleThrottle struct {
	// Limit is the sustained rate, in instances per second.
	Limit float64
	// Burst is how many instances may be requested at once.
	Burst int
}

// NewSchedule builds the policy schedule from Policies. It returns a new
// Schedule on every call so that each user has its own per-minute cache.
func (a *Autoscaler) NewSchedule() (*policy.Schedule, error) {
	return policy.NewSchedule(a.Policies)
}

// DefaultPolicyPeriod is the period used when the file has no
// [[autoscaler.policy]]: always active, one idle slot, preemptive.
func DefaultPolicyPeriod() policy.Period {
	return policy.Period{
		Periods:  []string{DefaultPeriod},
		Timezone: DefaultTimezone,
		Policy: policy.Policy{
			IdleCount:  DefaultIdleCount,
			IdleTime:   DefaultIdleTime,
			Preemptive: true,
		},
	}
}

// Default returns the configuration berth runs with when there is no config
// file: the built-in queue, the local provider and the defaults of docs/config.md.
func Default() *Config {
	return &Config{
		Listen:          DefaultListen,
		MaxConnections:  DefaultMaxConnections,
		StateDir:        DefaultStateDir(),
		LogLevel:        DefaultLogLevel,
		LogFormat:       DefaultLogFormat,
		JobTimeout:      DefaultJobTimeout,
		ShutdownTimeout: DefaultShutdownTimeout,
		Sources:         []Source{{Kind: SourceQueue}},
		Images:          DefaultImages(),
		JobRetention:    DefaultJobRetention,
		LogRetention:    DefaultLogRetention,
		Autoscaler: Autoscaler{
			Provider:               DefaultProvider,
			ProviderConfig:         json.RawMessage("{}"),
			CapacityPerInstance:    DefaultCapacityPerInstance,
			MaxInstances:           DefaultMaxInstances,
			InstanceAcquireTimeout: DefaultInstanceAcquireTimeout,
			UnknownInstances:       UnknownInstancesAdopt,
			EnvironmentTTL:         DefaultEnvironmentTTL,
			EnvironmentEvictAfter:  DefaultEnvironmentEvictAfter,
			HeartbeatInterval:      DefaultHeartbeatInterval,
			FailureThreshold:       DefaultFailureThreshold,
			ScaleThrottle:          ScaleThrottle{Limit: DefaultScaleThrottleLimit, Burst: DefaultScaleThrottleBurst},
			Policies:               []policy.Period{DefaultPolicyPeriod()},
		},
	}
}

// Load reads and parses the file at path. Relative paths inside it
// (state_dir, token_file) are taken relative to the file's directory.
func Load(path string, opts ...Option) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w; pass an existing file with --config, or none to use the defaults", err)
	}
	return Parse(data, path, opts...)
}

// Option changes how Parse and Load check a config.
type Option func(*Config)

// ProviderProblem is one problem a ProviderCheck found.
type ProviderProblem struct {
	// Name is true when autoscaler.provider itself is wrong (unknown).
	Name bool
	// Key is the key under provider_config the problem is about; "" for
	// the table as a whole.
	Key string
	// Message says what is wrong and what to do.
	Message string
	// Warning is true for what is worth saying but does not stop berth,
	// such as a plugin that cannot check its provider_config before it
	// starts.
	Warning bool
}

// ProviderCheck checks a provider name and its provider_config (as JSON);
// pluginDir is autoscaler.plugin_dir, where a provider that is not built in
// is looked for. The berth binary passes one built on package provider's
// registry and the plugin lookup; config itself does not know which
// providers exist. When provider_path names the binary, name is that
// absolute path.
type ProviderCheck func(name, pluginDir string, providerConfig []byte) []ProviderProblem

// WithProviderCheck makes Parse, Load and Validate report an unknown
// provider and provider_config problems with every other problem, at their
// line in the file, instead of only when the daemon starts the provider.
func WithProviderCheck(fn ProviderCheck) Option { return func(c *Config) { c.providerCheck = fn } }

// SetProviderCheck is WithProviderCheck for a Config that did not come from
// Load, such as Default(); Validate then runs it.
func (c *Config) SetProviderCheck(fn ProviderCheck) { c.providerCheck = fn }

// Parse parses data as a berth config. name is used in messages and, when
// it is a path, to resolve relative paths; it may be a bare label such as
// "berth.toml". The error, if any, is an *Error listing every problem.
func Parse(data []byte, name string, opts ...Option) (*Config, error) {
	if name == "" {
		name = "berth.toml"
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, syntaxError(name, err)
	}
	dir := filepath.Dir(name)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	d := &decoder{
		file:  name,
		dir:   dir,
		lines: indexLines(string(data)),
	}
	cfg := d.decode(raw)
	cfg.File = name
	cfg.origin = d.origin
	cfg.origin.file = name
	cfg.origin.lines = d.lines
	for _, o := range opts {
		o(cfg)
	}
	issues, warnings := cfg.check()
	cfg.Warnings = append(cfg.Warnings, warnings...)
	if all := append(d.issues, issues...); len(all) > 0 {
		sortIssues(all)
		return nil, &Error{Issues: all}
	}
	return cfg, nil
}

// Validate checks c's values, e.g. after command-line flags have overridden
// some of them. For a Config from Parse or Load, messages carry file lines;
// the returned error is an *Error. Warnings are not returned; see Warnings.
func (c *Config) Validate() error {
	issues, _ := c.check()
	if len(issues) > 0 {
		return &Error{Issues: issues}
	}
	return nil
}

// Issue is one problem in a configuration.
type Issue struct {
	// File is the config file name; empty for a Config not read from a file.
	File string
	// Line is the 1-based line of Key, 0 when unknown.
	Line int
	// Key is the dotted key path, e.g. "autoscaler.policy[1].idle_count";
	// array elements are indexed from 0.
	Key string
	// Value is the offending value as written in TOML, empty when not
	// applicable (unknown or missing keys).
	Value string
	// Message says what is wrong and what to do.
	Message string
}

// String renders the issue as "file:line: key = value: message".
func (i Issue) String() string {
	var b strings.Builder
	if i.File != "" {
		b.WriteString(i.File)
		if i.Line > 0 {
			b.WriteString(":" + strconv.Itoa(i.Line))
		}
		b.WriteString(": ")
	}
	if i.Key != "" {
		b.WriteString(i.Key)
		if i.Value != "" {
			b.WriteString(" = " + i.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(i.Message)
	return b.String()
}

// Error is returned for an invalid configuration; it lists every problem
// found, in file order as far as possible.
type Error struct {
	// Issues holds at least one problem.
	Issues []Issue
}

// Error implements error: one issue per line.
func (e *Error) Error() string {
	s := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		s[i] = is.String()
	}
	return strings.Join(s, "\n")
}

func syntaxError(name string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := "invalid TOML: " + pe.Message
		if pe.Usage != "" {
			// Usage is a paragraph; its first line is the useful hint.
			hint, _, _ := strings.Cut(strings.TrimSpace(pe.Usage), "\n")
			msg += " (" + strings.TrimSpace(hint) + ")"
		}
		return &Error{Issues: []Issue{{File: name, Line: pe.Position.Line, Key: pe.LastKey, Message: msg}}}
	}
	return &Error{Issues: []Issue{{File: name, Message: "invalid TOML: " + err.Error()}}}
}
