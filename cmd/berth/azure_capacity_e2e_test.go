package main

// End-to-end tests of the Azure plugin against the fake's capacity, quota
// and throttling modes (docs/azure.md, "Fidelity"), and of a cloud
// restarted from its state file.

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/azurefake"
)

// In an allocation failure Azure fails the scale-out and keeps the
// instances it could not create in the set, Failed, counted in capacity.
// The real berth and plugin show the error to the operator (the queued
// job's waiting_detail, /healthz), delete the failed instances so they do
// not hold the set's room, and run the job once Azure has capacity again,
// the set never above max_instances.
func TestAzureAllocationFailureIsShownAndGivenBack(t *testing.T) {
	const max = 2
	f := startAzureFake(t, azurefake.Options{BootTime: 300 * time.Millisecond, DeleteTime: 200 * time.Millisecond,
		ListingLag: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond, AllocationFailure: azurefake.CodeAllocationFailed}, nil)
	watch := watchAzureMax(f)
	d := azureDaemon(t, f, "max_instances = 2")
	id := d.submit("--", "echo ran")

	waitFor(t, time.Minute, "the queued job to wait for capacity, naming AllocationFailed", func() bool {
		j := d.job(id)
		return j.WaitingFor == api.WaitCapacity && strings.Contains(j.WaitingDetail, "AllocationFailed")
	})
	if code, body := d.healthBody(); code != 200 || !strings.Contains(body, `"creation_error"`) || !strings.Contains(body, "sufficient capacity") {
		t.Errorf("/healthz in a shortage: %d %s; want 200, degraded, with the allocation error", code, body)
	}
	waitFor(t, 30*time.Second, "the failed instances to be deleted", func() bool {
		for _, name := range f.Live() {
			if in, _ := f.Instance(name); in.FailureCode != "" {
				return false
			}
		}
		return f.Capacity() == 0
	})

	f.AllocationFailure("-")
	if j := d.waitJobs(2*time.Minute, id)[0]; j.State != api.JobSuccess {
		t.Fatalf("job after the shortage: %s (%s)", j.State, j.Reason)
	}
	if capacity, live := watch.result(); capacity > max || live > max {
		t.Errorf("the set held up to %d instances (capacity %d); max_instances is %d", live, capacity, max)
	}
}

// A vCPU quota refuses the scale-out at request time (409
// OperationNotAllowed). berth shows Azure's numbers to the operator, keeps
// running and asks again (transient, as on every cloud), and runs the job
// once the quota is raised.
func TestAzureQuotaRefusalIsShownAndPasses(t *testing.T) {
	f := startAzureFake(t, azurefake.Options{BootTime: 300 * time.Millisecond, DeleteTime: 200 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, CoreQuota: 1}, nil)
	d := azureDaemon(t, f, "max_instances = 2")
	id := d.submit("--", "echo ran")
	waitFor(t, time.Minute, "the queued job to wait for capacity, naming the quota", func() bool {
		j := d.job(id)
		return j.WaitingFor == api.WaitCapacity && strings.Contains(j.WaitingDetail, "Total Regional Cores quota") && strings.Contains(j.WaitingDetail, "higher vCPU quota")
	})
	if code, body := d.healthBody(); code != 200 || !strings.Contains(body, "OperationNotAllowed") {
		t.Errorf("/healthz over the quota: %d %s; want 200, degraded, naming OperationNotAllowed", code, body)
	}
	f.SetCoreQuota(0)
	if j := d.waitJobs(2*time.Minute, id)[0]; j.State != api.JobSuccess {
		t.Fatalf("job after the quota was raised: %s (%s)", j.State, j.Reason)
	}
}

// ARM throttles writes with a Retry-After of 90 s, longer than azcore's
// retry policy waits (it returns the 429 at once; at 65 s, berth's first
// write came late enough that the SDK slept through the rest inside the
// call). The plugin makes no write before it (the fake counts calls that
// come early), the queued job meanwhile says it waits for the throttle
// and until when, and the job runs after it.
func TestAzureLongRetryAfterIsHonoured(t *testing.T) {
	f := startAzureFake(t, azurefake.Options{BootTime: 300 * time.Millisecond, DeleteTime: 200 * time.Millisecond,
		PollInterval: 100 * time.Millisecond}, nil)
	// Throttled before berth starts: its first scale-up must wait too.
	f.ThrottleFor("UpdateScaleSet", 90*time.Second)
	d := azureDaemon(t, f, "max_instances = 1")
	id := d.submit("--", "echo ran")
	// While the throttle lasts, the queued job says it waits for it, and
	// until when, not for max_instances or instances that could not be
	// created.
	var j api.Job
	waitFor(t, time.Minute, "the queued job to name the throttle", func() bool {
		j = d.job(id)
		return j.State == api.JobQueued && strings.Contains(j.WaitingDetail, "throttl")
	})
	if j.WaitingFor != api.WaitThrottled || !rfc3339.MatchString(j.WaitingDetail) || strings.Contains(j.WaitingDetail, "could not create") {
		t.Errorf("queued job while the throttle lasts: waiting_for %q, detail %q; want %q, naming the time it ends", j.WaitingFor, j.WaitingDetail, api.WaitThrottled)
	}
	if j := d.waitJobs(3*time.Minute, id)[0]; j.State != api.JobSuccess {
		t.Fatalf("job after the Retry-After: %s (%s)", j.State, j.Reason)
	}
	if n := f.Early("UpdateScaleSet"); n != 0 {
		t.Errorf("%d capacity updates came before the Retry-After; want none", n)
	}
}

// rfc3339 matches a time as the plugins print it.
var rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// A scale set overprovisioned (Azure's default) is refused at start,
// naming the setting and the fix.
func TestAzureOverprovisionedSetIsRefused(t *testing.T) {
	f := startAzureFake(t, azurefake.Options{}, nil)
	f.SetOverprovision(true)
	bin := pluginBin(t, "cmd/berth-provider-azure", "berth-provider-azure")
	cfg, _ := json.Marshal(f.config)
	b, err := exec.Command(berthBin, "provider", "test", bin, "--config", string(cfg)).CombinedOutput()
	if out := string(b); err == nil || !strings.Contains(out, "overprovision=false") || !strings.Contains(out, "Terraform") {
		t.Fatalf("berth provider test on an overprovisioned set: %v\n%s\nwant a refusal naming overprovision=false and Terraform", err, out)
	}
}

// The fake cloud is killed (SIGKILL) and restarted from its state file
// while berth runs on it: berth's next job runs on the instance that was
// there before (same address, same host key, same disk), and nothing
// leaks.
func TestAzureCloudRestartFromItsStateFile(t *testing.T) {
	fakeBin := pluginBin(t, "internal/azurefake/cmd/azurefake", "azurefake")
	dir := t.TempDir()
	args := []string{"-dir", dir, "-state", filepath.Join(dir, "state.json"), "-boot-time", "300ms", "-start-time", "300ms",
		"-deallocate-time", "300ms", "-delete-time", "200ms", "-listing-lag", "200ms", "-poll-interval", "100ms", "-max-size", "1"}
	startFake := func() *exec.Cmd {
		os.Remove(filepath.Join(dir, "berth.toml"))
		cmd := exec.Command(fakeBin, args...)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// It prints the provider_config once it serves.
		if !bufio.NewScanner(out).Scan() {
			t.Fatal("azurefake printed no provider_config")
		}
		return cmd
	}
	cloud := startFake()
	t.Cleanup(func() { cloud.Process.Kill(); cloud.Wait() })
	pc, err := os.ReadFile(filepath.Join(dir, "provider_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AZURE_TENANT_ID", "11111111-1111-1111-1111-111111111111")
	t.Setenv("AZURE_CLIENT_ID", "22222222-2222-2222-2222-222222222222")
	t.Setenv("AZURE_CLIENT_SECRET", "fake-secret")
	t.Setenv("AZURE_CONFIG_DIR", t.TempDir())
	var cfg map[string]any
	if err := json.Unmarshal(pc, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["suspend"] = false
	d := azureDaemon(t, &azureFake{config: cfg}, "max_instances = 1\n[[autoscaler.policy]]\nidle_count = 1")
	out, errOut, code := d.berth("submit", "--wait", "--", "echo before > $HOME/marker; basename $HOME")
	if code != 0 {
		t.Fatalf("job before the restart: exit %d: %s", code, errOut)
	}
	host := strings.TrimSpace(out)

	cloud.Process.Signal(syscall.SIGKILL)
	cloud.Wait()
	cloud = startFake()
	out, errOut, code = d.berth("submit", "--wait", "--", "cat $HOME/marker; basename $HOME")
	if code != 0 || out != "before\n"+host+"\n" {
		t.Fatalf("job after the cloud restarted: exit %d, output %q (want before and %s), stderr %s", code, out, host, errOut)
	}
}
