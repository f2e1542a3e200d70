package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runBerth runs the berth binary in dir and returns stdout, stderr and the
// exit code.
func runBerth(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(berthBin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("berth %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// The corpus of gitlab-runner config files written from GitLab's
// documented examples is imported by the berth binary, and each result
// passes `berth config check` with the cloud plugins installed next to
// berth, which check provider_config themselves; the token is in its file,
// never on stdout. The AWS plugin refuses GitLab's config_file key, which
// the check reports (it said OK before the plugins were asked).
func TestConfigImportThenCheck(t *testing.T) {
	for _, p := range []string{"aws", "gcp", "azure"} {
		pluginBin(t, "cmd/berth-provider-"+p, "berth-provider-"+p)
	}
	corpus, err := filepath.Abs("../../config/runnerimport/testdata/gitlab")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"aws-docker-autoscaler.toml", "aws-instance.toml", "gcp-docker-autoscaler-key.toml",
		"azure-docker-autoscaler.toml", "aws-docker-machine.toml"} {
		t.Run(file, func(t *testing.T) {
			dir := t.TempDir()
			src, err := os.ReadFile(filepath.Join(corpus, file))
			if err != nil {
				t.Fatal(err)
			}
			out, stderr, code := runBerth(t, dir, "config", "import", filepath.Join(corpus, file), "--token-dir", "tokens-"+file)
			if code == 0 {
				t.Fatalf("import into a missing --token-dir succeeded:\n%s", stderr)
			}
			out, stderr, code = runBerth(t, dir, "config", "import", filepath.Join(corpus, file), "--token-dir", dir)
			if code != 0 {
				t.Fatalf("import: exit %d\n%s", code, stderr)
			}
			token := between(string(src), `token = "`, `"`)
			if strings.Contains(out, token) || strings.Contains(stderr, token) {
				t.Errorf("the runner token is in the output")
			}
			tokFile := between(out, `token_file = "`, `"`)
			got, err := os.ReadFile(tokFile)
			if fi, serr := os.Stat(tokFile); err != nil || strings.TrimSpace(string(got)) != token || serr != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("token file %s: %q, %v (mode %v); want the token, mode 0600", tokFile, got, err, fi.Mode())
			}
			cfg := filepath.Join(dir, "berth.toml")
			// state_dir in the test's directory: check reads nothing there, but
			// the default would be this user's.
			if err := os.WriteFile(cfg, []byte("state_dir = \"state\"\n"+out), 0o600); err != nil {
				t.Fatal(err)
			}
			checkOut, checkErr, code := runBerth(t, dir, "config", "check", cfg)
			if code != 0 || !strings.Contains(checkOut, "OK: ") {
				t.Fatalf("config check of the imported file: exit %d\n%s%s\n%s", code, checkOut, checkErr, out)
			}
		})
	}

	// GitLab's AWS example sets config_file, which berth's plugin does not
	// take: written into provider_config by hand, the check fails as
	// berth run would.
	dir := t.TempDir()
	out, stderr, code := runBerth(t, dir, "config", "import", filepath.Join(corpus, "aws-docker-autoscaler.toml"), "--token-dir", dir)
	if code != 0 {
		t.Fatalf("import: %s", stderr)
	}
	out = strings.Replace(out, `name = "my-docker-asg"`, "name = \"my-docker-asg\"\nconfig_file = \"/home/user/.aws/config\"", 1)
	cfg := filepath.Join(dir, "berth.toml")
	if err := os.WriteFile(cfg, []byte("state_dir = \"state\"\n"+out), 0o600); err != nil {
		t.Fatal(err)
	}
	_, checkErr, code := runBerth(t, dir, "config", "check", cfg)
	if code == 0 || !strings.Contains(checkErr, `autoscaler.provider_config = {...}: aws: provider_config: json: unknown field "config_file"`) {
		t.Errorf("check of provider_config with config_file: exit %d\n%s", code, checkErr)
	}
}

// between returns the text of s after the first from, up to the next to.
func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(rest, to)
	return v
}
