package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// wantIssue parses src and fails unless an issue for key at line contains msg.
func wantIssue(t *testing.T, src, key string, line int, msg string) {
	t.Helper()
	c, err := Parse([]byte(src), "berth.toml")
	if err == nil {
		t.Fatalf("no error; config %+v", c)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error is %T: %v", err, err)
	}
	for _, is := range ce.Issues {
		if is.Key == key && is.Line == line && strings.Contains(is.Message, msg) {
			return
		}
	}
	t.Errorf("want issue at line %d for key %q containing %q; got:\n%v", line, key, msg, err)
}

// A GitLab admin pastes parts of their runner's config.toml: every name
// GitLab Runner spells differently gets the berth name or what to do.
func TestGitLabRunnerNamesGetHints(t *testing.T) {
	const gitlab = "[[source]]\nkind = \"gitlab\"\nurl = \"https://gitlab.com\"\ntoken = \"t\"\n" // lines 1-4
	tests := []struct {
		name, toml, key string
		line            int
		msg             string
	}{
		{"plugin", "[autoscaler]\nplugin = \"aws\"\n", "autoscaler.plugin", 2, `did you mean "provider"?`},
		{"plugin_config", "[autoscaler]\n[autoscaler.plugin_config]\nname = \"ci\"\n", "autoscaler.plugin_config", 2, `did you mean "provider_config"?`},
		{"connector_config", "[autoscaler.connector_config]\nusername = \"ec2-user\"\n", "autoscaler.connector_config", 1, "[autoscaler.provider_config.connector] (username, key_path"},
		{"update_interval", "[autoscaler]\nupdate_interval = \"1m\"\n", "autoscaler.update_interval", 2, "every 2 s"},
		{"update_interval_when_expecting", "[autoscaler]\nupdate_interval_when_expecting = \"2s\"\n", "autoscaler.update_interval_when_expecting", 2, "every 2 s"},
		{"limit in autoscaler", "[autoscaler]\nlimit = 5\n", "autoscaler.limit", 2, `did you mean "max_instances"?`},
		{"request_concurrency in autoscaler", "[autoscaler]\nrequest_concurrency = 5\n", "autoscaler.request_concurrency", 2, `move it into the [[source]]`},
		{"runners", "[[runners]]\nname = \"x\"\n", "runners", 1, `[[source]] with kind = "gitlab"`},
		{"concurrent", "concurrent = 10\n", "concurrent", 1, "max_instances × "},
		{"check_interval at top", "check_interval = 3\n", "check_interval", 1, "move it into the [[source]]"},
		{"listen_address", "listen_address = \":9252\"\n", "listen_address", 1, `did you mean "listen"?`},
		{"builds_dir at top", "builds_dir = \"/builds\"\n", "builds_dir", 1, "move it into the [[source]]"},
		{"output_limit at top", "output_limit = 8192\n", "output_limit", 1, "move it into the [[source]]"},
		{"executor", gitlab + "executor = \"docker-autoscaler\"\n", "source[0].executor", 5, "berth is the executor"},
		{"tls-ca-file", gitlab + "tls-ca-file = \"/etc/ssl/ca.pem\"\n", "source[0].tls-ca-file", 5, `did you mean "ca_file"?`},
		{"limit in source", gitlab + "limit = 4\n", "source[0].limit", 5, "max_instances × "},
		{"runners.autoscaler in source", gitlab + "[source.autoscaler]\nplugin = \"aws\"\n", "source[0].autoscaler", 5, "top-level [autoscaler]"},
		{"tags", gitlab + "tags = [\"linux\"]\n", "source[0].tags", 5, "set the tags on the runner in GitLab"},
		{"environment", gitlab + "environment = [\"A=1\"]\n", "source[0].environment", 5, "CI/CD variables"},
		{"pre_build_script", gitlab + "pre_build_script = \"x\"\n", "source[0].pre_build_script", 5, "instance_ready_command"},
		{"runners.docker", gitlab + "[source.docker]\nimage = \"alpine\"\nprivileged = true\n", "source[0].docker", 5, "[images] table (pull_policy"},
		{"runners.cache", gitlab + "[source.cache]\nType = \"s3\"\n", "source[0].cache", 5, "top-level [cache]"},
		{"cache Type", "[cache]\nType = \"s3\"\n", "cache.Type", 2, "S3-compatible bucket"},
		{"cache.s3", "[cache]\n[cache.s3]\nBucketName = \"b\"\n", "cache.s3", 2, "BucketName → bucket, BucketLocation → region"},
		{"cache Path", "[cache]\nPath = \"p\"\n", "cache.Path", 2, `did you mean "prefix"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantIssue(t, tt.toml, tt.key, tt.line, tt.msg) })
	}
}

func TestShutdownTimeout(t *testing.T) {
	c, err := Parse([]byte("shutdown_timeout = \"30s\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.ShutdownTimeout != 30*time.Second {
		t.Errorf("ShutdownTimeout = %v, want 30s", c.ShutdownTimeout)
	}
	if d := Default().ShutdownTimeout; d != 5*time.Minute {
		t.Errorf("default ShutdownTimeout = %v, want 5m", d)
	}
	c, err = Parse([]byte("shutdown_timeout = \"0s\"\n"), "berth.toml")
	if err != nil || c.ShutdownTimeout != 0 {
		t.Errorf("0s (cancel at once) must be allowed: %v %v", c, err)
	}
	wantIssue(t, "shutdown_timeout = \"-1s\"\n", "shutdown_timeout", 1, "0 (cancel running jobs at once) or more")
	// gitlab-runner writes it as seconds.
	wantIssue(t, "shutdown_timeout = 30\n", "shutdown_timeout", 1, `GitLab Runner's unit is seconds: write "30s"`)
	wantIssue(t, "shutdown_timeout = 0\n", "shutdown_timeout", 1, `write "0s" (0 there meant its default, 30 s`)
}

func TestGitLabJobKeys(t *testing.T) {
	const gitlab = "[[source]]\nkind = \"gitlab\"\nurl = \"https://gitlab.com\"\ntoken = \"t\"\n" // lines 1-4
	c, err := Parse([]byte(gitlab+"builds_dir = \"/builds\"\noutput_limit = 1024\nproxy = \"http://proxy.example.com:3128\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sources[0]
	if s.BuildsDir != "/builds" || s.OutputLimit != 1<<20 || s.Proxy != "http://proxy.example.com:3128" {
		t.Errorf("source = %+v", s)
	}
	c, err = Parse([]byte(gitlab), "berth.toml")
	if err != nil || c.Sources[0].OutputLimit != 4<<20 || c.Sources[0].BuildsDir != "" {
		t.Errorf("defaults: %+v %v", c.Sources, err)
	}
	wantIssue(t, gitlab+"builds_dir = \"builds\"\n", "source[0].builds_dir", 5, "absolute path on the instance")
	wantIssue(t, gitlab+"output_limit = 0\n", "source[0].output_limit", 5, "at least 1 (kilobytes")
	wantIssue(t, gitlab+"output_limit = \"4MB\"\n", "source[0].output_limit", 5, "must be an integer")
	wantIssue(t, gitlab+"proxy = \"proxy:3128\"\n", "source[0].proxy", 5, "proxy URL")
	wantIssue(t, gitlab+"ca_file = \"testdata/no-such-ca.pem\"\n", "source[0].ca_file", 5, "cannot read the CA bundle")
	wantIssue(t, gitlab+"ca_file = \"testdata/gitlab-token\"\n", "source[0].ca_file", 5, "holds no PEM certificate")
	for _, k := range []string{"builds_dir = \"/b\"", "output_limit = 1", "ca_file = \"x\"", "proxy = \"http://p:1\""} {
		key := "source." + strings.TrimSpace(strings.Split(k, "=")[0])
		wantIssue(t, "[source]\nkind = \"queue\"\n"+k+"\n", key, 3, `only valid for kind = "gitlab"`)
	}
}

func TestGitLabCAFile(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, selfSignedPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	// Relative to the config file, like token_file.
	cfgFile := filepath.Join(dir, "berth.toml")
	src := "[[source]]\nkind = \"gitlab\"\nurl = \"https://gitlab.internal\"\ntoken = \"t\"\nca_file = \"ca.pem\"\n"
	if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].CAFile != ca {
		t.Errorf("CAFile = %q, want %q", c.Sources[0].CAFile, ca)
	}
}

func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// A policy key where a reader looks first ([autoscaler], the top level) is
// sent to [[autoscaler.policy]], not left as "unknown key".
func TestPolicyKeysOutsideAPolicyGetHints(t *testing.T) {
	for _, tt := range []struct{ name, toml, key string }{
		{"idle_time in autoscaler", "[autoscaler]\nidle_time = \"20m\"\n", "autoscaler.idle_time"},
		{"idle_count in autoscaler", "[autoscaler]\nidle_count = 2\n", "autoscaler.idle_count"},
		{"target_wait at top", "\ntarget_wait = \"15s\"\n", "target_wait"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantIssue(t, tt.toml, tt.key, 2, "put it in an [[autoscaler.policy]] period")
		})
	}
	// Every key the hint names is one a policy period takes.
	c, err := Parse([]byte("[[autoscaler.policy]]\n"+strings.Join([]string{
		`periods = ["* * * * *"]`, `timezone = "UTC"`, "idle_count = 1", `idle_time = "20m"`, "scale_factor = 0.0",
		"scale_factor_limit = 0", "preemptive_mode = false", `suspended_idle_time = "0s"`, "suspended_idle_count = 0", `target_wait = "0s"`,
	}, "\n")+"\n"), "berth.toml")
	if err != nil {
		t.Fatalf("a policy with every hinted key: %v (%+v)", err, c)
	}
	if len(policyKeys) != 10 {
		t.Errorf("policyKeys has %d keys; the test above writes 10: keep them in step", len(policyKeys))
	}
}

// Hints send the reader to documentation pages that exist (a hint once
// named a README section that had never been there).
func TestHintsPointToExistingDocs(t *testing.T) {
	ref := regexp.MustCompile(`docs/[a-z0-9-]+\.md`)
	n := 0
	for table, hints := range runnerHints {
		for k, h := range hints {
			if strings.Contains(h, "README") {
				t.Errorf("hint for %s.%s names the README, which is a front page: name a docs/ page: %s", table, k, h)
			}
			for _, page := range ref.FindAllString(h, -1) {
				n++
				if _, err := os.Stat(filepath.Join("..", page)); err != nil {
					t.Errorf("hint for %s.%s points to %s: %v", table, k, page, err)
				}
			}
		}
	}
	if n == 0 {
		t.Error("no hint points to a docs page: the test checks nothing")
	}
}
