package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The example config of the release tarball is what a new install runs:
// it must pass the check its own header tells the reader to run, keep
// tokens out of the file, and start with no schedule (a weekday period
// booting several sandboxes on a fresh install surprises).
func TestPackagedConfig(t *testing.T) {
	text, err := os.ReadFile("../../packaging/berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	src := string(text)
	if !strings.Contains(src, "berth config check /etc/berth/berth.toml") {
		t.Error("the example config does not tell the reader to check it with `berth config check`")
	}
	if regexp.MustCompile(`(?m)^#?\s*token\s*=`).MatchString(src) {
		t.Error("the example config suggests an inline token; use token_file, as docs/use-gitlab.md advises")
	}
	if n := strings.Count(src, "\n[[autoscaler.policy]]"); n != 1 {
		t.Errorf("the example config has %d active policy periods; want one, all the time", n)
	}
	out, err := exec.Command(berthBin, "config", "check", "../../packaging/berth.toml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "is valid") {
		t.Fatalf("berth config check packaging/berth.toml: %v\n%s", err, out)
	}

	// The commented GitLab source, uncommented as the reader would, with
	// the token file in place.
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "gitlab-token")
	os.WriteFile(tokenFile, []byte("glrt-example\n"), 0o600)
	gitlab := regexp.MustCompile(`(?m)^# (\[\[source\]\]|kind = "gitlab"|url = |token_file = |request_concurrency = )`)
	if len(gitlab.FindAllString(src, -1)) != 5 {
		t.Fatalf("the example config's commented GitLab source changed; update this test:\n%s", src)
	}
	withGitLab := gitlab.ReplaceAllString(src, "$1")
	withGitLab = strings.ReplaceAll(withGitLab, `token_file = "/var/lib/berth/gitlab-token"`, `token_file = "`+tokenFile+`"`)
	file := filepath.Join(dir, "berth.toml")
	os.WriteFile(file, []byte(withGitLab), 0o600)
	out, err = exec.Command(berthBin, "config", "check", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sources queue, gitlab") {
		t.Fatalf("the example config with its GitLab source: %v\n%s", err, out)
	}
}
