package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `berth config check FILE` reports what `berth run --config FILE` would
// refuse, with the same messages, and starts nothing.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(toml string) string {
		f := filepath.Join(dir, "berth.toml")
		if err := os.WriteFile(f, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	bad := write(`state_dir = "` + dir + `/state"
[autoscaler]
plugin = "aws"
provider = "awz"
[autoscaler.plugin_config]
region = "eu-west-1"
`)
	_, _, checkErr := runCLI(t, newConfigCmd(), "", "check", bad)
	_, _, runErr := runCLI(t, newRunCmd(), "", "--config", bad)
	if checkErr == nil || runErr == nil {
		t.Fatalf("check: %v; run: %v", checkErr, runErr)
	}
	if checkErr.Error() != runErr.Error() {
		t.Errorf("check and run disagree:\ncheck: %v\nrun:   %v", checkErr, runErr)
	}
	for _, want := range []string{
		bad + `:3: autoscaler.plugin: unknown key; did you mean "provider"?`,
		bad + `:4: autoscaler.provider = "awz": unknown provider "awz"`,
		bad + `:5: autoscaler.plugin_config: unknown key; did you mean "provider_config"?`,
	} {
		if !strings.Contains(checkErr.Error(), want) {
			t.Errorf("check lacks %q:\n%v", want, checkErr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Error("config check created the state directory")
	}

	good := write(`state_dir = "` + dir + `/state"
shutdown_timeout = "30s"
[autoscaler]
provider = "sim"
max_instances = 4
`)
	out, _, err := runCLI(t, newConfigCmd(), "", "check", good)
	if err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	if !strings.Contains(out, "OK: "+good+" is valid") || !strings.Contains(out, "provider sim; up to 4 instances") {
		t.Errorf("output: %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Error("config check created the state directory")
	}

	// The complete sample the docs point at is a config berth starts with.
	if _, _, err := runCLI(t, newConfigCmd(), "", "check", "../../config/testdata/berth.toml"); err != nil {
		t.Errorf("config/testdata/berth.toml: %v", err)
	}

	if _, _, err := runCLI(t, newConfigCmd(), "", "check", filepath.Join(dir, "missing.toml")); err == nil ||
		!strings.Contains(err.Error(), "read config") {
		t.Errorf("missing file: %v", err)
	}
}

// A second SIGTERM cancels the running jobs at once instead of waiting for
// shutdown_timeout, after the first one warned that it would.
func TestSecondSignalForcesStop(t *testing.T) {
	d := newDaemon(t, "shutdown_timeout = \"1h\"\n")
	id := d.submit("--", "sleep", "600")
	waitFor(t, 60*time.Second, "the job to run", func() bool { return d.job(id).State == "running" })
	d.cmd.Process.Signal(os.Interrupt)
	waitFor(t, 30*time.Second, "the first signal's warning", func() bool {
		return strings.Contains(d.log.String(), "send it again to cancel running jobs now")
	})
	select {
	case <-d.done:
		t.Fatal("berth exited on the first signal although a job runs and shutdown_timeout is 1h")
	default:
	}
	d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("berth still runs after the second signal:\n%s", d.log)
	}
	for _, want := range []string{"second stop signal: canceling running jobs now", "msg=stopped"} {
		if !strings.Contains(d.log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, d.log)
		}
	}
}
