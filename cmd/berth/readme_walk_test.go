package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/sshdtest"
)

// The README's and docs/' commands are run as a script would run them, so that the
// docs and the code cannot drift apart: every ```sh block preceded by a
// line <!-- walk: NAME --> belongs to walk NAME; a marked ```toml block is
// a config file the reader writes: it is saved as ~/berth.toml and must
// pass `berth config check`. The walker changes only what a reader changes
// too:
//
//   - a line commented "# terminal 1" is a daemon the reader starts in a
//     terminal of its own: it runs in the background, and the next line
//     waits until something listens on berth's default address;
//   - the user's own values (hosts, login, key files, install directories)
//     are replaced by the test's, listed per walk in subst.
//
// HOME is a fresh directory (berth's default state directory lives there),
// the working directory is the repository, and walks that start berth on
// its default address run in a private network namespace, so they need
// root (as CI has).

// readmeWalks returns the marked blocks of README.md and of every page in
// docs/ by walk name, so that a walk can live on the page that explains it.
func readmeWalks(t *testing.T) map[string][]string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	walks := map[string][]string{}
	for _, page := range append([]string{"../../README.md"}, pages...) {
		pageWalks(t, page, walks)
	}
	return walks
}

// pageWalks adds the marked blocks of one Markdown page to walks.
func pageWalks(t *testing.T, page string, walks map[string][]string) {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	marker := regexp.MustCompile(`^<!-- walk: ([a-z0-9-]+)\b.*-->$`)
	sc := bufio.NewScanner(f)
	var name string
	var block []string
	inBlock, toml := false, false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inBlock && line == "```":
			if toml {
				block = append([]string{"cat > ~/berth.toml <<'WALK_EOF'"}, block...)
				block = append(block, "WALK_EOF", "berth config check ~/berth.toml")
			}
			walks[name] = append(walks[name], block...)
			inBlock, name, block = false, "", nil
		case inBlock:
			block = append(block, line)
		case name != "" && (line == "```sh" || line == "```toml"):
			inBlock, toml = true, line == "```toml"
		case name != "" && strings.TrimSpace(line) != "":
			t.Fatalf("%s: the marker of walk %q must be followed by a ```sh or ```toml block, found %q", filepath.Base(page), name, line)
		default:
			if m := marker.FindStringSubmatch(line); m != nil {
				name = m[1]
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// walkScript turns a walk's lines into a bash script.
func walkScript(lines []string) string {
	var b strings.Builder
	b.WriteString(`set -euo pipefail
# Stop every process the walk started (daemons get SIGTERM and stop gracefully).
trap 'trap "" TERM; kill -TERM -- -$$ 2>/dev/null || true; wait || true' EXIT
wait_listen() {
	for _ in $(seq 1500); do
		if (exec 3<>/dev/tcp/127.0.0.1/8765) 2>/dev/null; then return 0; fi
		sleep 0.2
	done
	echo "walk: nothing listens on 127.0.0.1:8765 after 5 minutes" >&2
	return 1
}
`)
	var cont string
	heredoc := false
	for _, line := range lines {
		switch {
		case strings.HasSuffix(line, "<<'WALK_EOF'"):
			heredoc = true
			b.WriteString(line + "\n")
			continue
		case line == "WALK_EOF":
			heredoc = false
			b.WriteString(line + "\n")
			continue
		case heredoc:
			b.WriteString(line + "\n")
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cont += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, cont = cont+line, ""
		if cmd, _, daemon := strings.Cut(line, "# terminal 1"); daemon {
			fmt.Fprintf(&b, "echo '+ %s &'\n%s &\nwait_listen\n", strings.TrimSpace(cmd), strings.TrimSpace(cmd))
			continue
		}
		if strings.TrimSpace(line) != "" {
			fmt.Fprintf(&b, "echo %s\n%s\n", shellQuote("+ "+strings.TrimSpace(line)), line)
		}
	}
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runWalk runs script with HOME set to home and returns its combined output.
func runWalk(t *testing.T, name, script, home string, netns bool) (string, error) {
	t.Helper()
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	vals := strings.Fields(string(goEnv))
	file := filepath.Join(t.TempDir(), name+".sh")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"bash", file}
	if netns {
		args = []string{"unshare", "--net", "sh", "-c", `ip link set lo up && exec bash "$0"`, file}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "HOME="+home, "GOCACHE="+vals[0], "GOMODCACHE="+vals[1], "GOPATH="+vals[2],
		"PATH="+filepath.Dir(berthBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"BERTH_SERVER=", "BERTH_TOKEN=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	// Daemons stop gracefully after the script's trap; wait for them, then
	// make sure nothing of the walk is left.
	pgid := cmd.Process.Pid
	for i := 0; i < 600 && syscall.Kill(-pgid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
		t.Logf("walk %s: processes left after 60 s were killed", name)
	}
	if testing.Verbose() {
		t.Logf("walk %s:\n%s", name, out.String())
	}
	return out.String(), err
}

func TestREADMEWalks(t *testing.T) {
	walks := readmeWalks(t)
	for _, want := range []string{"quickstart", "plugin", "aws"} {
		if len(walks[want]) == 0 {
			t.Errorf("neither README.md nor docs/*.md has a block marked <!-- walk: %s -->", want)
		}
	}
	netnsOK := os.Geteuid() == 0 && exec.Command("unshare", "--net", "true").Run() == nil

	t.Run("quickstart", func(t *testing.T) {
		if !netnsOK {
			t.Skip("starts berth on its default address: needs root for a private network namespace")
		}
		home := t.TempDir()
		t.Cleanup(func() { removeSandboxes(t, filepath.Join(home, ".local/state/berth/provider/local")) })
		out, err := runWalk(t, "quickstart", walkScript(walks["quickstart"]), home, true)
		if err != nil || !strings.Contains(out, "hello from local-") {
			t.Fatalf("quickstart: %v; want %q in\n%s", err, "hello from local-", out)
		}
	})

	t.Run("plugin", func(t *testing.T) {
		srv := sshdtest.Start(t) // the user's machines: a stock OpenSSH server
		_, port, _ := strings.Cut(srv.Addr, ":")
		home := t.TempDir()
		script := walkScript(walks["plugin"])
		for _, s := range [][2]string{
			{"/usr/local/lib/berth", filepath.Join(home, "lib/berth")},
			{`"10.0.0.5:22", "10.0.0.6:22"`, `"127.0.0.1:` + port + `", "localhost:` + port + `"`},
			{`"username": "ci"`, `"username": "` + srv.User + `"`},
			{"/etc/berth/ci_key", srv.UserKeyFile},
		} {
			if !strings.Contains(script, s[0]) {
				t.Fatalf("the plugin walk no longer contains %q; update the test's substitutions", s[0])
			}
			script = strings.ReplaceAll(script, s[0], s[1])
		}
		out, err := runWalk(t, "plugin", script, home, false)
		if err != nil || !strings.Contains(out, "PASS  SSH") || !strings.Contains(out, "OK: the plugin conforms") ||
			!strings.Contains(out, "is valid: sources queue; provider static") {
			t.Fatalf("plugin: %v\n%s", err, out)
		}
	})

	t.Run("aws", func(t *testing.T) {
		if !netnsOK {
			t.Skip("starts berth on its default address: needs root for a private network namespace")
		}
		home := t.TempDir()
		out, err := runWalk(t, "aws", walkScript(walks["aws"]), home, true)
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil || !strings.Contains(out, "OK: the plugin conforms") || !strings.Contains(out, "hello from ") {
			t.Fatalf("aws: %v\n%s", err, out)
		}
	})
}
