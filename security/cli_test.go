//go:build linux

package security_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

var (
	berthOnce sync.Once
	berthBin  string
	berthErr  error
)

// cliEnv hands the CLI the root run built to the run as nobody.
const cliEnv = "BERTH_SECURITY_CLI_BIN"

// berthBinary builds the berth CLI once per test binary (as root), or
// takes the one the root run built (as nobody).
func berthBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(cliEnv); p != "" {
		return p
	}
	berthOnce.Do(func() {
		dir, err := os.MkdirTemp("", "berth-cli-")
		if err != nil {
			berthErr = err
			return
		}
		os.Chmod(dir, 0o755)
		berthBin = filepath.Join(dir, "berth")
		out, err := exec.Command("go", "build", "-o", berthBin, "github.com/berth-ci/berth/cmd/berth").CombinedOutput()
		if err != nil {
			berthErr = err
			berthBin = string(out)
		}
	})
	if berthErr != nil {
		t.Fatalf("build berth: %v\n%s", berthErr, berthBin)
	}
	return berthBin
}

// TestJobOutputCannotDriveTheTerminal runs a job that prints an OSC 52
// clipboard write, a title change and a screen clear, and reads its log
// with the CLI (authenticating with --token-file, which keeps the token out
// of ps): only the text and its colours reach the terminal, unless --raw.
func TestJobOutputCannotDriveTheTerminal(t *testing.T) {
	bin := berthBinary(t)
	b := startBerth(t)
	c := api.NewClient("http://" + b.addr)
	c.Token = b.token
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := c.Submit(ctx, api.JobRequest{Script: `printf 'before\033]52;c;cm0gLXJmIH4K\007\033]0;pwned\007\033[2J\033[32mgreen\033[0m after\n'`})
	must(t, err)
	for !job.State.Done() {
		time.Sleep(20 * time.Millisecond)
		job, err = c.Job(ctx, job.ID)
		must(t, err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(tokenFile, []byte(b.token), 0o600))
	logs := func(extra ...string) string {
		args := append([]string{"logs", "--server", "http://" + b.addr, "--token-file", tokenFile, job.ID}, extra...)
		var out, errOut bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return out.String()
	}
	if got, want := logs(), "before\033[32mgreen\033[0m after\n"; got != want {
		t.Errorf("berth logs printed %q, want %q", got, want)
	}
	if got := logs("--raw"); !strings.Contains(got, "\033]52;") {
		t.Errorf("berth logs --raw dropped the job's escapes: %q", got)
	}
}
