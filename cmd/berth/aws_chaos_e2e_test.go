package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/awsfake"
)

// The fake AWS region is killed (SIGKILL) while berth runs jobs on it and
// restarted from its state file on the same address, as a cloud endpoint
// that goes away and comes back. Every job queued at the kill succeeds;
// a job running at the kill may fail (its SSH session was served by the
// fake process itself, which a real instance would keep), but never hangs;
// max_instances is never exceeded in the cloud; and once the jobs are done
// and the idle instances deleted, the cloud holds no instance berth does
// not report (nothing leaked).
func TestAWSCloudRestartUnderBerth(t *testing.T) {
	const maxInstances = 2
	fakeBin := pluginBin(t, "internal/awsfake/cmd/awsfake", "awsfake")
	bin := pluginBin(t, "cmd/berth-provider-aws", "berth-provider-aws")
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.json")
	args := []string{"-dir", dir, "-state", statePath, "-boot-time", "300ms", "-listing-lag", "200ms", "-stop-time", "300ms",
		"-terminate-time", "200ms", "-lifecycle-time", "200ms", "-max-size", "4"}
	startFake := func() *exec.Cmd {
		cmd := exec.Command(fakeBin, args...)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// It prints the provider_config once it serves.
		if !bufio.NewScanner(out).Scan() {
			t.Fatal("awsfake printed no provider_config")
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
	awsfake.StaticCredentials(t)
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(map[string]any{"autoscaler": map[string]any{"provider_path": bin, "max_instances": maxInstances,
		"provider_config": pcfg, "policy": []map[string]any{{"idle_count": 0, "idle_time": "2s"}}}}); err != nil {
		t.Fatal(err)
	}
	d := newDaemon(t, b.String())

	// live reads the instances the region holds from its state file
	// (written on every change), and checks max_instances on the way.
	maxSeen := 0
	live := func() []string {
		raw, err := os.ReadFile(statePath)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Instances []awsfake.Instance `json:"instances"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, in := range s.Instances {
			if in.Lifecycle != "" && in.State != awsfake.EC2Terminated {
				ids = append(ids, in.ID)
			}
		}
		maxSeen = max(maxSeen, len(ids))
		return ids
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
		case atKill[ids[i]] == api.JobRunning && j.State == api.JobFailed && j.Reason != "":
			failedRunning++
			t.Logf("job %s, running at the kill, failed: %s", ids[i], j.Reason)
		default:
			t.Errorf("job %s (%s at the kill): %s (%s); want success", ids[i], atKill[ids[i]], j.State, j.Reason)
		}
	}
	waitFor(t, 2*time.Minute, "the idle instances deleted, and berth and the region to agree", func() bool {
		var berth []string
		for _, in := range d.instances() {
			berth = append(berth, in.ID)
		}
		cloud := live()
		sort.Strings(berth)
		sort.Strings(cloud)
		return len(cloud) == 0 && strings.Join(berth, ",") == strings.Join(cloud, ",")
	})
	if maxSeen > maxInstances {
		t.Errorf("the region held %d instances at once; max_instances is %d", maxSeen, maxInstances)
	}
	t.Logf("jobs: %d, running at the kill and failed: %d, most instances at once: %d", len(ids), failedRunning, maxSeen)
}
