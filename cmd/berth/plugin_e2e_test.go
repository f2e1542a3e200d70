package main

// End-to-end tests of external provider plugins: the real berth binary runs
// real jobs through the local provider served as a plugin binary.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/provider/plugin"
)

// pluginBuilds holds one *pluginBuild per package.
var pluginBuilds sync.Map

type pluginBuild struct {
	once sync.Once
	path string
	err  error
}

// pluginBin builds the plugin main package pkg (relative to the module
// root) once per test binary, next to the berth binary, as `name`.
func pluginBin(t *testing.T, pkg, name string) string {
	t.Helper()
	v, _ := pluginBuilds.LoadOrStore(pkg, &pluginBuild{})
	b := v.(*pluginBuild)
	b.once.Do(func() {
		b.path = filepath.Join(filepath.Dir(berthBin), name)
		out, err := exec.Command("go", "build", "-o", b.path, "../../"+pkg).CombinedOutput()
		if err != nil {
			b.err = err
			b.path = string(out)
		}
	})
	if b.err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, b.err, b.path)
	}
	return b.path
}

type healthz struct {
	Status   string         `json:"status"`
	Provider string         `json:"provider"`
	Plugin   *plugin.Health `json:"provider_plugin"`
}

func (d *daemon) health() healthz {
	d.t.Helper()
	resp, err := healthClient.Get("http://" + d.listen + "/healthz")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var h healthz
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		d.t.Fatal(err)
	}
	return h
}

func (d *daemon) metrics() string {
	d.t.Helper()
	resp, err := http.Get("http://" + d.listen + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestJobsRunThroughThePluginAndSurviveItsKill9(t *testing.T) {
	bin := pluginBin(t, "cmd/berth-provider-local", "berth-provider-local")
	d := newDaemon(t, `
[autoscaler]
provider_path = "`+bin+`"
max_instances = 3
`)
	h := d.health()
	if h.Plugin == nil || h.Plugin.Name != "local" || h.Plugin.Status != "ok" || h.Plugin.PID == 0 {
		t.Fatalf("/healthz = %+v; want the local plugin, running", h)
	}
	out, errOut, code := d.berth("submit", "--wait", "--", "echo hello from $(hostname)")
	if code != 0 || !strings.HasPrefix(out, "hello from local-") {
		t.Fatalf("job through the plugin: exit %d, output %q, stderr %s", code, out, errOut)
	}

	// A job runs while the plugin is killed: the job's SSH session does not
	// go through the plugin, so it finishes; berth restarts the plugin.
	long := d.submit("--", "sleep 2; echo survived")
	waitFor(t, time.Minute, "the long job to run", func() bool { return d.job(long).State == api.JobRunning })
	oldPID := h.Plugin.PID
	if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "berth to restart the plugin", func() bool {
		h = d.health()
		return h.Plugin.Restarts == 1 && h.Plugin.Status == "ok" && h.Plugin.PID != oldPID
	})
	// The reason is the exit, or a call that met the dead connection first.
	if h.Status != "ok" || h.Plugin.LastError == "" {
		t.Errorf("/healthz after the restart = %+v %+v; want status ok and the reason", h, *h.Plugin)
	}
	if j := d.waitJobs(time.Minute, long)[0]; j.State != api.JobSuccess {
		t.Errorf("job running while the plugin was killed: %s (%s)", j.State, j.Reason)
	}
	if logs, _, _ := d.berth("logs", long); !strings.Contains(logs, "survived") {
		t.Errorf("log of the job that outlived the plugin: %q", logs)
	}
	out, errOut, code = d.berth("submit", "--wait", "--", "echo next on $(hostname)")
	if code != 0 || !strings.HasPrefix(out, "next on local-") {
		t.Fatalf("job after the plugin restart: exit %d, output %q, stderr %s", code, out, errOut)
	}
	if m := d.metrics(); !strings.Contains(m, `berth_provider_restarts_total{provider="local"} 1`) {
		t.Errorf("metrics do not count the restart:\n%s", grepLines(m, "berth_provider"))
	}
	if err := syscall.Kill(oldPID, 0); err == nil {
		t.Errorf("the killed plugin process %d still exists", oldPID)
	}
	if !strings.Contains(d.log.String(), `msg="provider plugin restarted and initialised; reconciling the listing" plugin=local`) {
		t.Errorf("berth's log does not tell of the restart")
	}

	// Nothing leaked, nothing forgotten: every sandbox process is an
	// instance berth knows, and every instance berth holds as ready runs.
	waitFor(t, 30*time.Second, "berth's instances to match the sandboxes", func() bool {
		known := map[string]bool{}
		for _, in := range d.instances() {
			known[in.ID] = in.State == "ready"
		}
		procs := map[string]bool{}
		for _, id := range sandboxProcesses(d) {
			procs[id] = true
		}
		for id := range procs {
			if _, ok := known[id]; !ok {
				return false
			}
		}
		for id, ready := range known {
			if ready && !procs[id] {
				return false
			}
		}
		return len(procs) > 0
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestProviderNameFindsThePluginInPluginDir(t *testing.T) {
	sim := pluginBin(t, "cmd/berth-provider-sim", "berth-provider-sim")
	dir := t.TempDir()
	b, err := os.ReadFile(sim)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "berth-provider-fakecloud"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	d := newDaemon(t, `
[autoscaler]
provider = "fakecloud"
plugin_dir = "`+dir+`"
[autoscaler.provider_config]
seed = 7
`)
	h := d.health()
	if h.Plugin == nil || h.Plugin.Name != "fakecloud" || h.Provider != "sim/seed-7" {
		t.Fatalf("/healthz = %+v; want plugin fakecloud initialised with its provider_config (seed 7)", h)
	}
}

func TestUnknownProviderNamesWhereItLooked(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "berth.toml")
	os.WriteFile(cfg, []byte("listen = \"127.0.0.1:0\"\nstate_dir = \""+dir+"/state\"\n[autoscaler]\nprovider = \"nosuchcloud\"\nplugin_dir = \""+dir+"\"\n"), 0o644)
	out, err := exec.Command(berthBin, "run", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "berth-provider-nosuchcloud") || !strings.Contains(string(out), dir) {
		t.Fatalf("berth run with an unknown provider: %v\n%s\nwant an error naming the binary and the directory searched", err, out)
	}
}

// providerTest runs `berth provider test` and returns its output and exit code.
func providerTest(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, berthBin, append([]string{"provider", "test"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

func TestProviderTestPassesTheExamplePlugins(t *testing.T) {
	local := pluginBin(t, "cmd/berth-provider-local", "berth-provider-local")
	out, code := providerTest(t, local)
	if code != 0 || !strings.Contains(out, "PASS  SSH") || !strings.Contains(out, "PASS  SuspendResume") || !strings.Contains(out, "OK: the plugin conforms") {
		t.Errorf("berth provider test on the local plugin: exit %d\n%s", code, out)
	}

	sim := pluginBin(t, "cmd/berth-provider-sim", "berth-provider-sim")
	out, code = providerTest(t, "--skip-ssh", "--config", `{"supports_suspend": true}`, sim)
	if code != 0 || !strings.Contains(out, "SKIP  SSH") || !strings.Contains(out, "PASS  SuspendResume") || !strings.Contains(out, "PASS  Decrease") {
		t.Errorf("berth provider test --skip-ssh on the sim plugin: exit %d\n%s", code, out)
	}
}

func TestProviderTestNamesTheFailingCheck(t *testing.T) {
	broken := pluginBin(t, "internal/testdata/brokenplugin", "berth-provider-broken")
	out, code := providerTest(t, "--skip-ssh", "--timeout", "3s", "--config", `{"broken": "list-deleted"}`, broken)
	if code != 1 {
		t.Errorf("exit code %d on a plugin that lists deleted instances as running, want 1\n%s", code, out)
	}
	for _, want := range []string{"PASS  Increase", "FAIL  Decrease", "waiting for deleted instances to leave the listing", "running", "FAILED: Decrease ("} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, code = providerTest(t, "--config", `not json`, broken)
	if code != 1 || !strings.Contains(out, "--config must be a JSON object") {
		t.Errorf("bad --config: exit %d\n%s", code, out)
	}
}

func TestHostKeyTrustedOnFirstUseForAPluginThatCannotReportIt(t *testing.T) {
	bin := pluginBin(t, "internal/testdata/brokenplugin", "berth-provider-broken")
	d := newDaemon(t, `
[autoscaler]
provider_path = "`+bin+`"
max_instances = 1
[autoscaler.provider_config]
base = "local"
broken = "no-host-key"
`)
	t.Cleanup(func() { d.stop(); removeSandboxes(t, filepath.Join(d.dir, "state", "provider", "broken")) })
	for i := range 2 {
		out, errOut, code := d.berth("submit", "--wait", "--", "echo via tofu on $(hostname)")
		if code != 0 || !strings.HasPrefix(out, "via tofu on local-") {
			t.Fatalf("job %d through a plugin without host keys: exit %d, output %q, stderr %s", i, code, out, errOut)
		}
	}
	// One instance, two jobs: its key was learned once, then read from the store.
	if n := strings.Count(d.log.String(), "trusting the instance's SSH host key on first use"); n != 1 {
		t.Errorf("%d trust-on-first-use log lines for one instance, want 1:\n%s", n, d.log)
	}
	if !strings.Contains(d.log.String(), "fingerprint=SHA256:") {
		t.Errorf("the trust-on-first-use line does not name the key's fingerprint")
	}
}

// TestPluginResetsTheInstanceBetweenJobs: through the local provider served
// as a plugin, the job after another on the same instance finds none of
// the processes and files the first left behind, as with the built-in.
func TestPluginResetsTheInstanceBetweenJobs(t *testing.T) {
	bin := pluginBin(t, "cmd/berth-provider-local", "berth-provider-local")
	d := newDaemon(t, `
[autoscaler]
provider_path = "`+bin+`"
max_instances = 1
`)
	out, errOut, code := d.berth("submit", "--wait", "--", `setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
echo left > /tmp/left; echo left > /dev/shm/left; echo left > $HOME/left
`+inspect)
	// procs counts the loop's shell, and its sleep once forked: 1 or 2.
	if code != 0 || strings.Contains(out, "procs=0") || !strings.Contains(out, "files=3") {
		t.Fatalf("first job: exit %d, output %q, stderr %s; want it to see its own process and 3 files", code, out, errOut)
	}
	out, errOut, code = d.berth("submit", "--wait", "--", inspect)
	if code != 0 {
		t.Fatalf("second job: exit %d, %s %s", code, out, errOut)
	}
	if !strings.Contains(out, "procs=0") || !strings.Contains(out, "files=0") {
		t.Errorf("the second job saw what the first left on its instance:\n%s", out)
	}
	if ins := d.instances(); len(ins) != 1 {
		t.Errorf("instances: %+v; want the one both jobs ran on", ins)
	}
}
