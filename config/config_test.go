package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/berth-ci/berth/policy"
)

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	if c.Listen != "127.0.0.1:8765" || c.LogLevel != "info" || c.JobTimeout != time.Hour {
		t.Errorf("top level defaults: %+v", c)
	}
	if len(c.Sources) != 1 || c.Sources[0].Kind != SourceQueue {
		t.Errorf("sources = %+v, want the built-in queue", c.Sources)
	}
	a := c.Autoscaler
	want := Autoscaler{
		Provider: "local", ProviderConfig: json.RawMessage("{}"),
		CapacityPerInstance: 1, MaxInstances: 10, MaxUseCount: 0,
		InstanceAcquireTimeout: 15 * time.Minute, UnknownInstances: "adopt",
		EnvironmentTTL: 168 * time.Hour, EnvironmentEvictAfter: time.Hour, HeartbeatInterval: 30 * time.Second, FailureThreshold: 3,
		ScaleThrottle: ScaleThrottle{Limit: 100, Burst: 10},
		Policies: []policy.Period{{
			Periods: []string{"* * * * *"}, Timezone: "UTC",
			Policy: policy.Policy{IdleCount: 1, IdleTime: 20 * time.Minute, Preemptive: true},
		}},
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("autoscaler defaults:\n got %+v\nwant %+v", a, want)
	}
	if _, err := a.NewSchedule(); err != nil {
		t.Errorf("default schedule: %v", err)
	}
	if !filepath.IsAbs(c.StateDir) {
		t.Errorf("StateDir %q is not absolute", c.StateDir)
	}
}

// An empty file means the defaults, exactly.
func TestEmptyFileIsDefault(t *testing.T) {
	for _, src := range []string{"", "# nothing here\n\n", "[autoscaler]\n"} {
		c, err := Parse([]byte(src), "berth.toml")
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		d := Default()
		c.File, c.origin = "", nil
		if !reflect.DeepEqual(c, d) {
			t.Errorf("%q:\n got %+v\nwant %+v", src, c, d)
		}
	}
}

func TestSample(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	c, err := Load("testdata/berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("sample has warnings: %v", c.Warnings)
	}
	if want := filepath.Join(home, ".local/state/berth"); c.StateDir != want {
		t.Errorf("StateDir = %q, want %q", c.StateDir, want)
	}
	abs, _ := filepath.Abs("testdata/gitlab-token")
	wantSources := []Source{
		{Kind: "queue"},
		{Kind: "gitlab", URL: "https://gitlab.example.com", Token: "glrt-EXAMPLE-token-value", TokenFile: abs,
			RequestConcurrency: 4, CheckInterval: 3 * time.Second, OutputLimit: 4 << 20},
	}
	if !reflect.DeepEqual(c.Sources, wantSources) {
		t.Errorf("sources:\n got %#v\nwant %#v", c.Sources, wantSources)
	}
	var pc map[string]any
	if err := json.Unmarshal(c.Autoscaler.ProviderConfig, &pc); err != nil || pc["network"] != "isolated" || pc["pids_max"] != 4096.0 {
		t.Errorf("provider_config = %s (%v)", c.Autoscaler.ProviderConfig, err)
	}
	if n := len(c.Autoscaler.Policies); n != 2 {
		t.Fatalf("%d policies, want 2", n)
	}
	office := c.Autoscaler.Policies[1]
	wantOffice := policy.Period{Periods: []string{"* 8-17 * * mon-fri"}, Timezone: "Europe/Berlin",
		Policy: policy.Policy{IdleCount: 5, IdleTime: 30 * time.Minute, ScaleFactor: 0.5, ScaleFactorLimit: 10, Preemptive: true}}
	if !reflect.DeepEqual(office, wantOffice) {
		t.Errorf("office period = %+v", office)
	}
	s, err := c.Autoscaler.NewSchedule()
	if err != nil {
		t.Fatal(err)
	}
	if got := s.At(time.Date(2024, 1, 15, 9, 0, 0, 0, time.UTC)); got != wantOffice.Policy {
		t.Errorf("Monday 10:00 Berlin: %+v", got)
	}
	if !strings.Contains(c.Sources[1].String(), "gitlab.example.com") || strings.Contains(c.Sources[1].String(), "glrt") {
		t.Errorf("Source.String() = %q", c.Sources[1].String())
	}
}

// TestSampleCoversEveryKey keeps testdata/berth.toml (shown in the README)
// complete: every key the decoder reads must appear in it.
func TestSampleCoversEveryKey(t *testing.T) {
	data, err := os.ReadFile("testdata/berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, "testdata/berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	index := regexp.MustCompile(`\[\d+\]`)
	for k := range c.origin.written {
		in[index.ReplaceAllString(k, "")] = true
	}
	// Everything the decoder can read, found by decoding a file where each
	// table is present (so the decoder asks for all of its keys).
	d := &decoder{file: "x", lines: lineIndex{}}
	var raw map[string]any
	full := "[[source]]\nkind='gitlab'\n[autoscaler]\n[autoscaler.provider_config]\n[autoscaler.scale_throttle]\n[[autoscaler.policy]]\n[images]\n[cache]\n"
	if _, err := toml.Decode(full, &raw); err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{}
	d.onKnown = func(path string) { all[index.ReplaceAllString(path, "")] = true }
	d.decode(raw)
	var missing []string
	for k := range all {
		// token and token_file exclude each other; [ha] turns etcd on,
		// and the sample runs one manager (docs/config.md shows [ha]).
		if !in[k] && k != "source.token" && k != "ha" {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("testdata/berth.toml lacks keys: %v", missing)
	}
	if len(all) < 30 {
		t.Errorf("only %d keys known; the key hook is broken", len(all))
	}
}

func TestGoodConfigs(t *testing.T) {
	tests := []struct {
		name  string
		toml  string
		check func(t *testing.T, c *Config)
	}{
		{"single source table", "[source]\nkind = \"gitlab\"\nurl = \"https://gitlab.com\"\ntoken = \"t\"\n", func(t *testing.T, c *Config) {
			if len(c.Sources) != 1 || c.Sources[0].Kind != "gitlab" || c.Sources[0].Token != "t" || c.Sources[0].RequestConcurrency != 4 {
				t.Errorf("%+v", c.Sources)
			}
		}},
		{"inline array of sources", "source = [{kind = \"queue\"}, {kind = \"gitlab\", url = \"http://gl.local:8080\", token = \"t\", check_interval = \"10s\"}]\n", func(t *testing.T, c *Config) {
			if len(c.Sources) != 2 || c.Sources[1].CheckInterval != 10*time.Second {
				t.Errorf("%+v", c.Sources)
			}
		}},
		{"gitlab only", "[[source]]\nkind = \"gitlab\"\nurl = \"https://gitlab.com\"\ntoken_file = \"testdata/gitlab-token\"\n", func(t *testing.T, c *Config) {
			if len(c.Sources) != 1 || c.Sources[0].Token != "glrt-EXAMPLE-token-value" {
				t.Errorf("%+v", c.Sources)
			}
		}},
		{"dotted and inline keys", "autoscaler.max_instances = 3\nautoscaler.scale_throttle = { limit = 2.5, burst = 1 }\n", func(t *testing.T, c *Config) {
			if c.Autoscaler.MaxInstances != 3 || c.Autoscaler.ScaleThrottle != (ScaleThrottle{2.5, 1}) {
				t.Errorf("%+v", c.Autoscaler)
			}
		}},
		{"single policy table", "[autoscaler.policy]\nidle_count = 4\n", func(t *testing.T, c *Config) {
			p := c.Autoscaler.Policies
			if len(p) != 1 || p[0].Policy.IdleCount != 4 || p[0].Periods[0] != "* * * * *" || !p[0].Policy.Preemptive {
				t.Errorf("%+v", p)
			}
		}},
		{"on-demand with no idle pool", "[[autoscaler.policy]]\nidle_count = 0\npreemptive_mode = false\n", func(t *testing.T, c *Config) {
			if p := c.Autoscaler.Policies[0].Policy; p.IdleCount != 0 || p.Preemptive {
				t.Errorf("%+v", p)
			}
		}},
		{"preemptive, no idle pool, built-in queue only", "[[autoscaler.policy]]\nidle_count = 0\ntarget_wait = \"15s\"\nsuspended_idle_time = \"30m\"\n", func(t *testing.T, c *Config) {
			// The queue reports its queued jobs as demand, so this starts instances.
			if p := c.Autoscaler.Policies[0].Policy; p.IdleCount != 0 || !p.Preemptive || p.TargetWait != 15*time.Second || p.SuspendedIdleTime != 30*time.Minute {
				t.Errorf("%+v", p)
			}
		}},
		{"heartbeats off, big capacity", "[autoscaler]\nheartbeat_interval = \"0s\"\ncapacity_per_instance = 4\nmax_use_count = 100\nunknown_instances = \"delete\"\n", func(t *testing.T, c *Config) {
			a := c.Autoscaler
			if a.HeartbeatInterval != 0 || a.CapacityPerInstance != 4 || a.MaxUseCount != 100 || a.UnknownInstances != "delete" {
				t.Errorf("%+v", a)
			}
		}},
		{"plugin provider with nested config", "[autoscaler]\nprovider = \"aws\"\n[autoscaler.provider_config]\nregion = \"eu-central-1\"\n[autoscaler.provider_config.tags]\nteam = \"ci\"\n", func(t *testing.T, c *Config) {
			if c.Autoscaler.Provider != "aws" || string(c.Autoscaler.ProviderConfig) != `{"region":"eu-central-1","tags":{"team":"ci"}}` {
				t.Errorf("%s %s", c.Autoscaler.Provider, c.Autoscaler.ProviderConfig)
			}
		}},
		{"TLS beyond loopback", "listen = \"0.0.0.0:8765\"\ntls_cert_file = \"tls/berth.pem\"\ntls_key_file = \"/etc/berth/berth.key\"\n", func(t *testing.T, c *Config) {
			if !filepath.IsAbs(c.TLSCertFile) || filepath.Base(c.TLSCertFile) != "berth.pem" || c.TLSKeyFile != "/etc/berth/berth.key" || c.InsecureListen {
				t.Errorf("%q %q %v", c.TLSCertFile, c.TLSKeyFile, c.InsecureListen)
			}
		}},
		{"localhost needs no TLS", "listen = \"localhost:8765\"\n", func(t *testing.T, c *Config) {}},
		{"IPv6 loopback needs no TLS", "listen = \"[::1]:8765\"\n", func(t *testing.T, c *Config) {}},
		{"relative state_dir", "state_dir = \"state\"\nlisten = \":9000\"\ninsecure_listen = true\nlog_level = \"debug\"\njob_timeout = \"2h30m\"\n", func(t *testing.T, c *Config) {
			want, _ := filepath.Abs("state")
			if c.StateDir != want || c.Listen != ":9000" || c.JobTimeout != 150*time.Minute {
				t.Errorf("%+v", c)
			}
		}},
		{"descriptor period", "[[autoscaler.policy]]\n[[autoscaler.policy]]\nperiods = [\"@daily\", \"0 12 * * sat,sun\"]\ntimezone = \"America/New_York\"\n", func(t *testing.T, c *Config) {
			if len(c.Autoscaler.Policies) != 2 {
				t.Errorf("%+v", c.Autoscaler.Policies)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.toml), "berth.toml")
			if err != nil {
				t.Fatalf("unexpected error:\n%v", err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate after Parse: %v", err)
			}
			if _, err := c.Autoscaler.NewSchedule(); err != nil {
				t.Fatalf("NewSchedule: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestBadConfigs(t *testing.T) {
	const gitlab = "[[source]]\nkind = \"gitlab\"\n" // lines 1-2
	tests := []struct {
		name string
		toml string
		key  string
		line int
		msg  string
	}{
		// Syntax.
		{"unterminated string", "listen = \"127.0.0.1", "listen", 1, "invalid TOML"},
		{"syntax on line 3", "[autoscaler]\nmax_instances = 3\nmax_use_count = = 2\n", "autoscaler.max_use_count", 3, "invalid TOML"},
		{"duplicate key", "[autoscaler]\nmax_instances = 3\nmax_instances = 4\n", "autoscaler.max_instances", 3, "invalid TOML"},
		// Unknown keys.
		{"unknown top key", "\nlisten_addr = \":1\"\n", "listen_addr", 2, "unknown key"},
		{"typo suggestion", "[autoscaler]\nmax_instance = 3\n", "autoscaler.max_instance", 2, `did you mean "max_instances"`},
		{"unknown table", "[autoscaler]\n\n[autoscaler.polcy]\nidle_count = 2\n", "autoscaler.polcy", 3, `did you mean "policy"`},
		{"unknown key in second policy", "[[autoscaler.policy]]\nidle_count = 1\n[[autoscaler.policy]]\nidle_cnt = 2\n", "autoscaler.policy[1].idle_cnt", 4, `did you mean "idle_count"`},
		{"unknown key in source", "[source]\nkind = \"queue\"\nname = \"x\"\n", "source.name", 3, "unknown key"},
		{"unknown key in throttle", "[autoscaler.scale_throttle]\nrate = 3\n", "autoscaler.scale_throttle.rate", 2, "unknown key"},
		{"unknown inline key", "[autoscaler]\nscale_throttle = { limit = 1, brust = 2 }\n", "autoscaler.scale_throttle.brust", 2, `did you mean "burst"`},
		// Types.
		{"string for int", "[autoscaler]\nmax_instances = \"ten\"\n", "autoscaler.max_instances", 2, "must be an integer, not a string"},
		{"float for int", "[autoscaler]\ncapacity_per_instance = 1.5\n", "autoscaler.capacity_per_instance", 2, "must be an integer"},
		{"int for duration", "[[autoscaler.policy]]\nidle_time = 20\n", "autoscaler.policy[0].idle_time", 2, `duration string such as "15m"`},
		{"string for bool", "[autoscaler]\ndelete_instances_on_shutdown = \"yes\"\n", "autoscaler.delete_instances_on_shutdown", 2, "must be true or false"},
		{"string for periods", "[[autoscaler.policy]]\nperiods = \"* * * * *\"\n", "autoscaler.policy[0].periods", 2, "array of strings"},
		{"int in periods", "[[autoscaler.policy]]\nperiods = [\n  \"* * * * *\",\n  5,\n]\n", "autoscaler.policy[0].periods[1]", 4, "must be a string"},
		{"bad duration", "[autoscaler]\ninstance_acquire_timeout = \"15 minutes\"\n", "autoscaler.instance_acquire_timeout", 2, "not a duration"},
		{"source not a table", "source = 3\n", "source", 1, "table or an array of tables"},
		{"provider_config not a table", "[autoscaler]\nprovider_config = \"x\"\n", "autoscaler.provider_config", 2, "must be a table"},
		{"huge int", "[autoscaler]\nmax_instances = 99999999999\n", "autoscaler.max_instances", 2, "out of range"},
		// Semantics.
		{"max_instances 0", "[autoscaler]\nprovider = \"sim\"\nmax_instances = 0\n", "autoscaler.max_instances", 3, "must be at least 1"},
		{"dotted max_instances 0", "listen = \":1\"\nautoscaler.max_instances = 0\n", "autoscaler.max_instances", 2, "must be at least 1"},
		{"capacity 0", "[autoscaler]\ncapacity_per_instance = 0\n", "autoscaler.capacity_per_instance", 2, "at least 1"},
		{"max_use_count negative", "[autoscaler]\nmax_use_count = -1\n", "autoscaler.max_use_count", 2, "0 (unlimited) or more"},
		{"negative timeout", "[autoscaler]\ninstance_acquire_timeout = \"-1m\"\n", "autoscaler.instance_acquire_timeout", 2, "must be positive"},
		{"zero ttl", "[autoscaler]\nenvironment_ttl = \"0s\"\n", "autoscaler.environment_ttl", 2, "must be positive"},
		{"negative heartbeat", "[autoscaler]\nheartbeat_interval = \"-1s\"\n", "autoscaler.heartbeat_interval", 2, "positive"},
		{"failure_threshold 0", "[autoscaler]\nfailure_threshold = 0\n", "autoscaler.failure_threshold", 2, "at least 1"},
		{"throttle limit 0", "[autoscaler.scale_throttle]\nlimit = 0\nburst = 1\n", "autoscaler.scale_throttle.limit", 2, "positive"},
		{"throttle burst 0", "[autoscaler.scale_throttle]\nlimit = 1\nburst = 0\n", "autoscaler.scale_throttle.burst", 3, "at least 1"},
		{"inline throttle limit", "[autoscaler]\nscale_throttle = { limit = -1, burst = 1 }\n", "autoscaler.scale_throttle.limit", 2, "positive"},
		{"unknown_instances", "[autoscaler]\nunknown_instances = \"ignore\"\n", "autoscaler.unknown_instances", 2, `"adopt" or "delete"`},
		{"provider name", "[autoscaler]\nprovider = \"../evil\"\n", "autoscaler.provider", 2, "plugin NAME"},
		{"provider_config NaN", "[autoscaler.provider_config]\nx = nan\n", "autoscaler.provider_config", 1, "JSON"},
		{"scale_factor negative", "[[autoscaler.policy]]\nscale_factor = -1.0\n", "autoscaler.policy[0].scale_factor", 2, "0 or more"},
		{"scale_factor_limit negative", "[[autoscaler.policy]]\nscale_factor_limit = -1\n", "autoscaler.policy[0].scale_factor_limit", 2, "0 or more"},
		{"idle_count negative", "[[autoscaler.policy]]\npreemptive_mode = false\nidle_count = -1\n", "autoscaler.policy[0].idle_count", 3, "0 or more"},
		{"idle_time negative", "[[autoscaler.policy]]\nidle_time = \"-20m\"\n", "autoscaler.policy[0].idle_time", 2, "negative"},
		{"bad cron", "[[autoscaler.policy]]\n[[autoscaler.policy]]\nperiods = [\"* * * * *\", \"61 * * * *\"]\n", "autoscaler.policy[1].periods[1]", 3, "invalid cron"},
		{"bad cron multi-line", "[[autoscaler.policy]]\nperiods = [\n  \"* 8-17 * * mon-fri\",\n  \"* * * * funday\",\n]\n", "autoscaler.policy[0].periods[1]", 4, "invalid cron"},
		{"six-field cron", "[[autoscaler.policy]]\nperiods = [\"0 * * * * *\"]\n", "autoscaler.policy[0].periods[0]", 2, "invalid cron"},
		{"every", "[[autoscaler.policy]]\nperiods = [\"@every 1h\"]\n", "autoscaler.policy[0].periods[0]", 2, "interval"},
		{"TZ prefix", "[[autoscaler.policy]]\nperiods = [\"TZ=Europe/Berlin\"]\n", "autoscaler.policy[0].periods[0]", 2, "timezone"},
		{"empty periods", "[[autoscaler.policy]]\nperiods = []\n", "autoscaler.policy[0].periods", 2, "no cron"},
		{"unknown timezone", "[[autoscaler.policy]]\ntimezone = \"Europe/Berlín\"\n", "autoscaler.policy[0].timezone", 2, "unknown time zone"},
		{"preemptive without idle with gitlab", gitlab + "url = \"https://gitlab.com\"\ntoken = \"t\"\n[[autoscaler.policy]]\nperiods = [\"* * * * *\"]\nidle_count = 0\nscale_factor = 0.0\n", "autoscaler.policy[0].idle_count", 7, "preemptive_mode = false"},
		{"listen without port", "listen = \"localhost\"\n", "listen", 1, "host:port"},
		{"listen beyond loopback in clear text", "listen = \"0.0.0.0:8765\"\n", "listen", 1, "insecure_listen = true"},
		{"listen on every interface", "\nlisten = \":8765\"\n", "listen", 2, "tls_cert_file"},
		{"cert without key", "listen = \"0.0.0.0:8765\"\ntls_cert_file = \"berth.pem\"\n", "tls_cert_file", 2, "set both"},
		{"key without cert", "tls_key_file = \"berth.key\"\n", "tls_key_file", 1, "set both"},
		{"listen bad port", "listen = \"localhost:http\"\n", "listen", 1, "0 to 65535"},
		{"log level", "\n\nlog_level = \"verbose\"\n", "log_level", 3, `"debug", "info", "warn", "error"`},
		{"log format", "log_format = \"logfmt\"\n", "log_format", 1, `"text", "json"`},
		{"job_timeout 0", "job_timeout = \"0s\"\n", "job_timeout", 1, "positive"},
		{"empty state_dir", "state_dir = \"\"\n", "state_dir", 1, "must not be empty"},
		{"tilde user", "state_dir = \"~bob/state\"\n", "state_dir", 1, "~user"},
		{"no sources", "source = []\n", "source", 1, "no job source"},
		{"unknown kind", "[source]\nkind = \"github\"\n", "source.kind", 2, `use "queue" or "gitlab"`},
		{"two queues", "[[source]]\n[[source]]\nkind = \"queue\"\n", "source[1].kind", 3, "only one queue"},
		{"queue with url", "[source]\nurl = \"https://gitlab.com\"\n", "source.url", 2, `set kind = "gitlab"`},
		{"gitlab without url", gitlab + "token = \"t\"\n", "source[0].url", 1, "needs url"},
		{"gitlab bad url", gitlab + "url = \"gitlab.com\"\ntoken = \"t\"\n", "source[0].url", 3, "http or https URL"},
		{"gitlab without token", gitlab + "url = \"https://gitlab.com\"\n", "source[0].token", 1, "token_file"},
		{"token and token_file", gitlab + "url = \"https://gitlab.com\"\ntoken = \"t\"\ntoken_file = \"testdata/gitlab-token\"\n", "source[0].token_file", 5, "not both"},
		{"token_file unreadable", gitlab + "url = \"https://gitlab.com\"\ntoken_file = \"testdata/no-such-token\"\n", "source[0].token_file", 4, "cannot read the token file"},
		{"token_file empty", gitlab + "url = \"https://gitlab.com\"\ntoken_file = \"testdata/empty-token\"\n", "source[0].token_file", 4, "empty"},
		{"request_concurrency 0", gitlab + "url = \"https://gitlab.com\"\ntoken = \"t\"\nrequest_concurrency = 0\n", "source[0].request_concurrency", 5, "at least 1"},
		{"check_interval 0", gitlab + "url = \"https://gitlab.com\"\ntoken = \"t\"\ncheck_interval = \"0s\"\n", "source[0].check_interval", 5, "positive"},
		{"gitlab url with /api/v4", gitlab + "url = \"https://gitlab.example.com/api/v4/\"\ntoken = \"t\"\n", "source[0].url", 3, `without /api/v4 (url = "https://gitlab.example.com")`},
		{"registration token inline", gitlab + "url = \"https://gitlab.com\"\ntoken = \"GR1348941aBcDeFg\"\n", "source[0].token", 4, "create a runner in GitLab"},
		{"registration token in a file", gitlab + "url = \"https://gitlab.com\"\ntoken_file = \"testdata/registration-token\"\n", "source[0].token_file", 4, "starts with glrt-"},
		{"second source wrong", gitlab + "url = \"https://gitlab.com\"\ntoken = \"t\"\n\n[[source]]\nkind = \"gitlab\"\nurl = \"ftp://x\"\ntoken = \"t\"\n", "source[1].url", 8, "http or https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.toml), "berth.toml")
			if err == nil {
				t.Fatalf("no error; config %+v", c)
			}
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Issues) == 0 {
				t.Fatalf("error is %T, want *Error with issues: %v", err, err)
			}
			prefix := "berth.toml:" + strconv.Itoa(tt.line) + ": " + tt.key
			for _, is := range ce.Issues {
				if is.Key == tt.key && is.Line == tt.line && strings.Contains(is.Message, tt.msg) {
					if !strings.Contains(err.Error(), prefix) {
						t.Errorf("message lacks %q:\n%v", prefix, err)
					}
					return
				}
			}
			t.Errorf("want issue at line %d for key %q containing %q; got:\n%v", tt.line, tt.key, tt.msg, err)
		})
	}
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	src := `listen = 3
[autoscaler]
max_instances = 0
capacity_per_instance = 0
bogus = true
[[autoscaler.policy]]
timezone = "Nowhere/Special"
`
	_, err := Parse([]byte(src), "berth.toml")
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	var lines []int
	for _, is := range ce.Issues {
		lines = append(lines, is.Line)
	}
	if want := []int{1, 3, 4, 5, 7}; !reflect.DeepEqual(lines, want) {
		t.Errorf("issue lines %v, want %v (in file order):\n%v", lines, want, err)
	}
}

func TestTokenNeverInMessages(t *testing.T) {
	src := "[source]\nkind = \"queue\"\ntoken = \"glrt-SECRET\"\n"
	_, err := Parse([]byte(src), "berth.toml")
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error leaks the token or is missing: %v", err)
	}
}

func TestWarnings(t *testing.T) {
	src := `[autoscaler]
max_instances = 2
[[autoscaler.policy]]
idle_count = 5
scale_factor = 0.5
`
	c, err := Parse([]byte(src), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(c.Warnings))
	for i, w := range c.Warnings {
		got[i] = w.String()
	}
	want := []string{
		"berth.toml:4: autoscaler.policy[0].idle_count = 5: exceeds max_instances × capacity_per_instance = 2 slots; the idle pool will be capped there",
		"berth.toml:5: autoscaler.policy[0].scale_factor = 0.5: has no effect while scale_factor_limit = 0 (the idle target is min(scale_factor × in use, scale_factor_limit)); set scale_factor_limit",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// After flags override a value, Validate must not blame the file's line.
func TestValidateAfterOverride(t *testing.T) {
	c, err := Parse([]byte("listen = \"127.0.0.1:9000\"\n[autoscaler]\nmax_instances = 5\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	c.Listen = "nonsense"
	c.Autoscaler.MaxInstances = 0
	err = c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	want := "listen = \"nonsense\": must be host:port, e.g. \"127.0.0.1:8765\" or \":8765\" for all interfaces\n" +
		"autoscaler.max_instances = 0: must be at least 1"
	if err.Error() != want {
		t.Errorf("got\n%v\nwant\n%v", err, want)
	}
	// Unchanged values still point at the file.
	c2, _ := Parse([]byte("[autoscaler]\nmax_instances = 5\n"), "berth.toml")
	c2.Autoscaler.CapacityPerInstance = 1
	if err := c2.Validate(); err != nil {
		t.Error(err)
	}
}

func TestStateDir(t *testing.T) {
	t.Run("xdg", func(t *testing.T) {
		t.Setenv("XDG_STATE_HOME", "/var/lib/xdg")
		if got := DefaultStateDir(); got != "/var/lib/xdg/berth" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("home", func(t *testing.T) {
		home := t.TempDir()
		t.Setenv("XDG_STATE_HOME", "")
		t.Setenv("HOME", home)
		if got := DefaultStateDir(); got != filepath.Join(home, ".local/state/berth") {
			t.Errorf("got %q", got)
		}
	})
	fallback := filepath.Join(os.TempDir(), "berth-"+strconv.Itoa(os.Getuid()))
	t.Run("nobody", func(t *testing.T) {
		t.Setenv("XDG_STATE_HOME", "")
		t.Setenv("HOME", "/nonexistent")
		// Root may write to "/", where /nonexistent would be created.
		if os.Getuid() != 0 {
			if got := DefaultStateDir(); got != fallback {
				t.Errorf("got %q, want %q", got, fallback)
			}
		}
	})
	t.Run("no home", func(t *testing.T) {
		t.Setenv("XDG_STATE_HOME", "")
		t.Setenv("HOME", "")
		if got := DefaultStateDir(); got != fallback {
			t.Errorf("got %q, want %q", got, fallback)
		}
		_, err := Parse([]byte("state_dir = \"~/state\"\n"), "berth.toml")
		if err == nil || !strings.Contains(err.Error(), "berth.toml:1: state_dir = \"~/state\": cannot expand \"~\": $HOME is not set") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("tilde", func(t *testing.T) {
		t.Setenv("HOME", "/home/ci")
		c, err := Parse([]byte("state_dir = \"~/berth-state\"\n"), "/etc/berth/berth.toml")
		if err != nil || c.StateDir != "/home/ci/berth-state" {
			t.Errorf("got %q, %v", c.StateDir, err)
		}
		c, err = Parse([]byte("state_dir = \"state\"\n"), "/etc/berth/berth.toml")
		if err != nil || c.StateDir != "/etc/berth/state" {
			t.Errorf("relative: got %q, %v", c.StateDir, err)
		}
	})
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.toml")
	if err == nil || !strings.Contains(err.Error(), "does-not-exist.toml") || !strings.Contains(err.Error(), "--config") {
		t.Errorf("got %v", err)
	}
}

func TestDuration(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("1h30m")); err != nil || time.Duration(d) != 90*time.Minute {
		t.Errorf("got %v, %v", time.Duration(d), err)
	}
	if err := d.UnmarshalText([]byte("90")); err == nil {
		t.Error("unitless number accepted")
	}
	b, _ := Duration(15 * time.Minute).MarshalText()
	if string(b) != "15m0s" {
		t.Errorf("MarshalText = %s", b)
	}
}

func TestLineIndex(t *testing.T) {
	src := `# comment with key = 1
a = 1
s = """
b = 2
"""
lit = '''x = 1'''
"quoted.key" = 3
[t] # trailing
x = [
  1,
  { y = 2 },
]
[[arr]]
k = 1
[[arr]]
k = 2
[arr.sub]
m = 1
[[arr.list]]
n = 1
[[arr]]
dotted.inner = 4
`
	ix := indexLines(src)
	want := map[string]int{
		"a": 2, "s": 3, "lit": 6, `"quoted.key"`: 7, "t": 8, "t.x": 9, "t.x[1]": 11, "t.x[1].y": 11,
		"arr": 13, "arr[0]": 13, "arr[0].k": 14, "arr[1]": 15, "arr[1].k": 16, "arr[1].sub": 17, "arr[1].sub.m": 18,
		"arr[1].list[0]": 19, "arr[1].list[0].n": 20, "arr[2]": 21, "arr[2].dotted": 22, "arr[2].dotted.inner": 22,
	}
	for k, l := range want {
		if got := ix.line(k); got != l {
			t.Errorf("line(%s) = %d, want %d", k, got, l)
		}
	}
	if _, ok := ix["b"]; ok {
		t.Error("key inside a multi-line string was indexed")
	}
	if got := ix.line("t.x[0]"); got != 10 {
		t.Errorf("array element line = %d, want 10", got)
	}
	if got := ix.line("arr[1].sub.unknown"); got != 17 {
		t.Errorf("fallback to parent = %d, want 17", got)
	}
}

// TestPackagedExampleIsValid keeps packaging/berth.toml, the config the
// systemd unit starts with, loadable and free of warnings.
func TestPackagedExampleIsValid(t *testing.T) {
	c, err := Load("../packaging/berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("packaging/berth.toml has warnings: %v", c.Warnings)
	}
	if c.LogFormat != "json" || c.StateDir != "/var/lib/berth" {
		t.Errorf("log_format %q, state_dir %q: the example no longer matches the unit", c.LogFormat, c.StateDir)
	}
}
