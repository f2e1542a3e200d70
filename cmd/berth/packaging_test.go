package main

import (
	"fmt"
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

// TestPackagedServiceStarts runs what install.sh sets up, as systemd
// would: the unit's own ExecStart on the example config installed at
// /etc/berth/berth.toml (mode 0600), state in /var/lib/berth (the unit's
// StateDirectory), then a job through the CLI as the install's last line
// suggests. The host's /etc, /var/lib and /usr/local/bin are not touched:
// all of it happens in a mount namespace of its own where they are
// overlays, with a network namespace of its own for the unit's fixed
// port and a PID namespace whose end takes every process with it. The
// job must not see the config through the default host path /etc.
func TestPackagedServiceStarts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the unit runs berth as root; run the tests as root to check it")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is missing (util-linux, iproute2): it builds the namespaces this test needs", tool)
		}
	}
	unit, err := os.ReadFile("../../packaging/berth.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=(.+)$`).FindSubmatch(unit)
	if m == nil || !strings.HasPrefix(string(m[1]), "/usr/local/bin/berth ") {
		t.Fatalf("packaging/berth.service has no ExecStart running /usr/local/bin/berth; update this test:\n%s", unit)
	}
	dir := t.TempDir()
	for _, d := range []string{"etc/berth", "etc.work", "bin", "bin.work"} {
		must(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	conf, err := os.ReadFile("../../packaging/berth.toml")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "etc/berth/berth.toml"), conf, 0o600))
	for _, b := range []string{"berth", "berth-sandbox"} {
		must(t, os.Symlink(filepath.Join(filepath.Dir(berthBin), b), filepath.Join(dir, "bin", b)))
	}
	script := fmt.Sprintf(`set -eu
ip link set lo up
mount -t overlay overlay -o lowerdir=/etc,upperdir=%[1]s/etc,workdir=%[1]s/etc.work /etc
mount -t overlay overlay -o lowerdir=/usr/local/bin,upperdir=%[1]s/bin,workdir=%[1]s/bin.work /usr/local/bin
mount -t tmpfs -o mode=0755 tmpfs /var/lib
install -d -m 0700 /var/lib/berth
%[2]s >%[1]s/berth.log 2>&1 &
for i in $(seq 600); do
	if (exec 3<>/dev/tcp/127.0.0.1/8765) 2>/dev/null; then break; fi
	kill -0 $! 2>/dev/null || { echo "berth exited at start:"; cat %[1]s/berth.log; exit 1; }
	sleep 0.2
done
/usr/local/bin/berth submit --wait -- 'echo ran; cat /etc/berth/berth.toml 2>&1 | head -c 200; ls -A /etc/berth | wc -l'
kill -TERM $!
wait $! || true
`, dir, m[1])
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--net", "--pid", "--fork", "--mount-proc", "bash", "-c", script)
	cmd.Env = append(os.Environ(), "BERTH_SERVER=", "BERTH_TOKEN=", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ran\n") {
		log, _ := os.ReadFile(filepath.Join(dir, "berth.log"))
		t.Fatalf("the packaged service (%s) did not run a job: %v\n%s\nberth's log:\n%s", m[1], err, out, log)
	}
	if strings.Contains(string(out), "[autoscaler]") || !strings.Contains(string(out), "\n0\n") {
		t.Fatalf("a job saw the packaged config at /etc/berth/berth.toml:\n%s", out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
