package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/internal/azurefake"
	"github.com/berth-ci/berth/internal/gcpfake"
)

// chaosCloud is one cloud's fake process and plugin, for the restart
// test: the fake's flags besides -dir and -state, the environment the
// plugin needs, and how many instances the fake's state file holds alive.
type chaosCloud struct {
	fake, fakeName, plugin, pluginName string
	args                               []string
	env                                func(t *testing.T)
	live                               func(t *testing.T, state []byte) int
}

var chaosClouds = map[string]chaosCloud{
	"aws": {fake: "internal/awsfake/cmd/awsfake", fakeName: "awsfake", plugin: "cmd/berth-provider-aws", pluginName: "berth-provider-aws",
		args: []string{"-boot-time", "300ms", "-listing-lag", "200ms", "-stop-time", "300ms", "-terminate-time", "200ms", "-lifecycle-time", "200ms", "-max-size", "4"},
		env:  func(t *testing.T) { awsfake.StaticCredentials(t) },
		live: func(t *testing.T, raw []byte) int {
			var s struct{ Instances []awsfake.Instance }
			unmarshalState(t, raw, &s)
			n := 0
			for _, in := range s.Instances {
				if in.Lifecycle != "" && in.State != awsfake.EC2Terminated {
					n++
				}
			}
			return n
		}},
	"gcp": {fake: "internal/gcpfake/cmd/gcpfake", fakeName: "gcpfake", plugin: "cmd/berth-provider-gcp", pluginName: "berth-provider-gcp",
		args: []string{"-boot-time", "300ms", "-listing-lag", "200ms", "-stop-time", "300ms", "-operation-time", "200ms", "-max-size", "4"},
		env:  func(*testing.T) {},
		live: func(t *testing.T, raw []byte) int {
			var s struct{ Instances []gcpfake.Instance }
			unmarshalState(t, raw, &s)
			n := 0
			for _, in := range s.Instances {
				if !in.Gone {
					n++
				}
			}
			return n
		}},
	"azure": {fake: "internal/azurefake/cmd/azurefake", fakeName: "azurefake", plugin: "cmd/berth-provider-azure", pluginName: "berth-provider-azure",
		args: []string{"-boot-time", "300ms", "-start-time", "300ms", "-deallocate-time", "300ms", "-delete-time", "200ms", "-listing-lag", "200ms", "-poll-interval", "100ms", "-max-size", "4"},
		env: func(t *testing.T) {
			t.Setenv("AZURE_TENANT_ID", "11111111-1111-1111-1111-111111111111")
			t.Setenv("AZURE_CLIENT_ID", "22222222-2222-2222-2222-222222222222")
			t.Setenv("AZURE_CLIENT_SECRET", "fake-secret")
			t.Setenv("AZURE_CONFIG_DIR", t.TempDir())
		},
		live: func(t *testing.T, raw []byte) int {
			var s struct{ Instances map[string]azurefake.Instance }
			unmarshalState(t, raw, &s)
			n := 0
			for _, in := range s.Instances {
				if !in.Gone {
					n++
				}
			}
			return n
		}},
}

func unmarshalState(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("the fake's state file: %v", err)
	}
}

// Each fake cloud is killed (SIGKILL) while berth runs jobs on it and
// restarted from its state file on the same address, as a cloud endpoint
// that goes away and comes back. Every job queued at the kill succeeds; a
// job running at the kill may fail, with a reason (its SSH session was
// served by the fake process itself, which a real instance would keep
// serving), but none hangs; max_instances is never exceeded in the cloud;
// and once the jobs are done and the idle instances deleted, the cloud
// holds no instance (nothing leaked) and berth reports none.
func TestCloudRestartUnderBerth(t *testing.T) {
	for _, name := range []string{"aws", "gcp", "azure"} {
		t.Run(name, func(t *testing.T) { cloudRestartUnderBerth(t, chaosClouds[name]) })
	}
}

func cloudRestartUnderBerth(t *testing.T, cc chaosCloud) {
	const maxInstances = 2
	fakeBin := pluginBin(t, cc.fake, cc.fakeName)
	bin := pluginBin(t, cc.plugin, cc.pluginName)
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.json")
	args := append([]string{"-dir", dir, "-state", statePath}, cc.args...)
	startFake := func() *exec.Cmd {
		cmd := exec.Command(fakeBin, args...)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// It prints the provider_config once it serves.
		if !bufio.NewScanner(out).Scan() {
			t.Fatalf("%s printed no provider_config", cc.fakeName)
		}
		return cmd
	}
	cloud := startFake()
	t.Cleanup(func() { cloud.Process.Kill(); cloud.Wait() })
	pc, err := os.ReadFile(filepath.Join(dir, "provider_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pcfg map[string]any
	if err := json.Unmarshal(pc, &pcfg); err != nil {
		t.Fatal(err)
	}
	pcfg["suspend"] = false
	cc.env(t)
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(map[string]any{"autoscaler": map[string]any{"provider_path": bin, "max_instances": maxInstances,
		"provider_config": pcfg, "policy": []map[string]any{{"idle_count": 0, "idle_time": "2s"}}}}); err != nil {
		t.Fatal(err)
	}
	d := newDaemon(t, b.String())

	// live counts the instances the cloud holds from its state file
	// (written on every change), and checks max_instances on the way.
	maxSeen := 0
	live := func() int {
		raw, err := os.ReadFile(statePath)
		if err != nil {
			t.Fatal(err)
		}
		n := cc.live(t, raw)
		maxSeen = max(maxSeen, n)
		return n
	}

	var ids []string
	for i := range 4 {
		ids = append(ids, d.submit("--", fmt.Sprintf("sleep 2; echo job%d", i)))
	}
	waitFor(t, 2*time.Minute, "a job to run", func() bool {
		live()
		for _, id := range ids {
			if d.job(id).State == api.JobRunning {
				return true
			}
		}
		return false
	})
	cloud.Process.Signal(syscall.SIGKILL)
	cloud.Wait()
	// Read once the cloud is down: a job queued now cannot start before
	// the restart, since its instance's connection details need the API.
	atKill := map[string]api.JobState{}
	for _, id := range ids {
		atKill[id] = d.job(id).State
	}
	cloud = startFake()

	var jobs []api.Job
	waitFor(t, 3*time.Minute, "every job to end", func() bool {
		live()
		jobs = jobs[:0]
		for _, id := range ids {
			j := d.job(id)
			if !j.State.Done() {
				return false
			}
			jobs = append(jobs, j)
		}
		return true
	})
	failedRunning := 0
	for i, j := range jobs {
		switch {
		case j.State == api.JobSuccess:
		// Running at the kill, or already failed by it when the states
		// were read (its session dropped with the fake): in flight.
		case (atKill[ids[i]] == api.JobRunning || atKill[ids[i]] == api.JobFailed) && j.State == api.JobFailed && j.Reason != "":
			failedRunning++
			t.Logf("job %s, in flight at the kill, failed: %s", ids[i], j.Reason)
		default:
			t.Errorf("job %s (%s at the kill): %s (%s); want success", ids[i], atKill[ids[i]], j.State, j.Reason)
		}
	}
	waitFor(t, 2*time.Minute, "the idle instances deleted, in the cloud and in berth's report", func() bool {
		return live() == 0 && len(d.instances()) == 0
	})
	if maxSeen > maxInstances {
		t.Errorf("the cloud held %d instances at once; max_instances is %d", maxSeen, maxInstances)
	}
	t.Logf("jobs: %d, in flight at the kill and failed: %d, most instances at once: %d", len(ids), failedRunning, maxSeen)
}
