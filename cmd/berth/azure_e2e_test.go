package main

// End-to-end tests of the Azure provider plugin: the real berth binary
// runs berth-provider-azure against the fake Azure subscription of package
// internal/azurefake (ARM and Entra ID over TLS, instances that are real
// SSH hosts on this machine), through `berth provider test`, a whole
// `berth run` with suspend and resume, and the chaos the AWS plugin is put
// through: throttling, kill -9 of the plugin and of berth, listing lag.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/azurefake"
	"github.com/berth-ci/berth/internal/fakehost"
)

// azureFake is a fake Azure subscription and the provider_config that
// points berth-provider-azure at it.
type azureFake struct {
	*azurefake.Cloud
	config map[string]any
}

// startAzureFake starts the fake with a fresh OS profile key and exports
// the service principal berth's plugin authenticates as, as an admin's
// environment would. The set is created as docs/azure.md asks,
// overprovisioning off.
func startAzureFake(t *testing.T, opts azurefake.Options, extra map[string]any) *azureFake {
	t.Helper()
	opts.NoOverprovision = true
	dir := t.TempDir()
	keyPath, caPath := filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	pub, err := fakehost.WriteKeyPair(keyPath, "")
	if err != nil {
		t.Fatal(err)
	}
	opts.AuthorizedKey = pub
	opts.Dir = t.TempDir()
	cloud, err := azurefake.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cloud.Close)
	if err := os.WriteFile(caPath, cloud.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	o := cloud.Options()
	t.Setenv("AZURE_TENANT_ID", o.TenantID)
	t.Setenv("AZURE_CLIENT_ID", o.ClientID)
	t.Setenv("AZURE_CLIENT_SECRET", o.ClientSecret)
	t.Setenv("AZURE_CONFIG_DIR", t.TempDir())
	cfg := map[string]any{
		"subscription_id": o.Subscription, "resource_group": o.ResourceGroup, "name": o.ScaleSet,
		"endpoint": cloud.URL(), "authority_host": cloud.URL(), "ca_file": caPath, "ssh_port": cloud.SSHPort(),
		"suspend": true, "connector": map[string]any{"key_path": keyPath},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return &azureFake{Cloud: cloud, config: cfg}
}

// tomlTable renders the provider_config as the TOML lines of
// [autoscaler.provider_config]; JSON strings and numbers are valid TOML.
func (f *azureFake) tomlTable() string {
	var b strings.Builder
	b.WriteString("[autoscaler.provider_config]\n")
	for k, v := range f.config {
		if m, ok := v.(map[string]any); ok {
			var kv []string
			for mk, mv := range m {
				j, _ := json.Marshal(mv)
				kv = append(kv, fmt.Sprintf("%s = %s", mk, j))
			}
			fmt.Fprintf(&b, "%s = { %s }\n", k, strings.Join(kv, ", "))
			continue
		}
		j, _ := json.Marshal(v)
		fmt.Fprintf(&b, "%s = %s\n", k, j)
	}
	return b.String()
}

// azureDaemon starts berth with the Azure plugin on the fake.
func azureDaemon(t *testing.T, f *azureFake, autoscaler string) *daemon {
	t.Helper()
	bin := pluginBin(t, "cmd/berth-provider-azure", "berth-provider-azure")
	return newDaemon(t, "[autoscaler]\nprovider_path = \""+bin+"\"\n"+autoscaler+"\n"+f.tomlTable())
}

// azureMaxWatch records the most instances the fake's scale set ever held.
type azureMaxWatch struct {
	mu       sync.Mutex
	capacity int
	live     int
	stop     chan struct{}
	done     chan struct{}
}

func watchAzureMax(f *azureFake) *azureMaxWatch {
	w := &azureMaxWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			c, live := f.Capacity(), 0
			for _, name := range f.Live() {
				if in, ok := f.Instance(name); ok && in.Provisioning != azurefake.ProvisioningDeleting {
					live++
				}
			}
			w.mu.Lock()
			w.capacity, w.live = max(w.capacity, c), max(w.live, live)
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *azureMaxWatch) result() (capacity, live int) {
	close(w.stop)
	<-w.done
	return w.capacity, w.live
}

func TestAzureProviderTestPassesAgainstTheFake(t *testing.T) {
	f := startAzureFake(t, azurefake.Options{BootTime: 200 * time.Millisecond, StartTime: 200 * time.Millisecond,
		DeallocateTime: 200 * time.Millisecond, DeleteTime: 200 * time.Millisecond, ListingLag: 300 * time.Millisecond,
		PollInterval: 100 * time.Millisecond}, nil)
	bin := pluginBin(t, "cmd/berth-provider-azure", "berth-provider-azure")
	cfg, _ := json.Marshal(f.config)
	b, err := exec.Command(berthBin, "provider", "test", bin, "--config", string(cfg)).CombinedOutput()
	out := string(b)
	if err != nil || !strings.Contains(out, "OK: the plugin conforms") || !strings.Contains(out, "PASS  SuspendResume") || !strings.Contains(out, "PASS  SSH") {
		t.Fatalf("berth provider test: %v\n%s", err, out)
	}
	if c := f.Capacity(); c != 0 {
		t.Errorf("capacity %d after the suite, want 0", c)
	}
}

// A whole berth run on the fake: a job runs on a scale set instance, its
// environment is parked (the instance deallocated, its disk kept) and a
// later job resumes it (the instance started) and finds its files.
func TestAzureRunSuspendsAndResumesAnEnvironment(t *testing.T) {
	f := startAzureFake(t, azurefake.Options{BootTime: 300 * time.Millisecond, StartTime: 300 * time.Millisecond,
		DeallocateTime: 300 * time.Millisecond, DeleteTime: 200 * time.Millisecond, ListingLag: 200 * time.Millisecond,
		PollInterval: 100 * time.Millisecond}, nil)
	d := azureDaemon(t, f, "max_instances = 2")
	out, errOut, code := d.berth("submit", "--wait", "--suspend", "--", `echo parked-$(basename $HOME) > $HOME/marker; basename $HOME`)
	if code != 0 {
		t.Fatalf("submit --suspend: exit %d: %s", code, errOut)
	}
	m := envKeyLine.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("submit --suspend printed no environment key: %q", errOut)
	}
	host := strings.TrimSpace(out)
	waitFor(t, time.Minute, host+" deallocated in the fake", func() bool {
		in, ok := f.Instance(host)
		return ok && in.Power == azurefake.PowerDeallocated
	})
	out, errOut, code = d.berth("submit", "--wait", "--resume", m[1], "--", `cat $HOME/marker; basename $HOME`)
	if code != 0 {
		t.Fatalf("submit --resume: exit %d: %s", code, errOut)
	}
	if want := "parked-" + host + "\n" + host + "\n"; out != want {
		t.Fatalf("resumed job printed %q, want %q (same instance, same disk)", out, want)
	}
	if f.Calls("Deallocate") == 0 || f.Calls("Start") == 0 {
		t.Errorf("Deallocate called %d times, Start %d; want both", f.Calls("Deallocate"), f.Calls("Start"))
	}
}

// The chaos the AWS plugin is put through, on the Azure plugin: ARM
// throttles bursts of calls (429 with Retry-After), new instances appear
// in listings late, the plugin is killed with SIGKILL while jobs run, then
// berth itself. Every job ends with a result or a reason, the scale set
// never holds more than max_instances, and once the jobs are done no
// instance is left that berth does not know; the idle ones are deleted.
func TestAzureChaosThrottlingKill9AndListingLag(t *testing.T) {
	f := startAzureFake(t, azurefake.Options{BootTime: 300 * time.Millisecond, StartTime: 200 * time.Millisecond,
		DeallocateTime: 200 * time.Millisecond, DeleteTime: 200 * time.Millisecond, ListingLag: time.Second,
		PollInterval: 100 * time.Millisecond, RetryAfter: 100 * time.Millisecond}, nil)
	const maxInstances = 3
	d := azureDaemon(t, f, fmt.Sprintf("max_instances = %d\n[[autoscaler.policy]]\nidle_count = 0\nidle_time = \"3s\"", maxInstances))
	watch := watchAzureMax(f)
	stopThrottle := make(chan struct{})
	throttled := make(chan struct{})
	go func() {
		defer close(throttled)
		for i := 0; ; i++ {
			// Mostly fewer 429s than the SDK retries, so calls succeed
			// late; now and then more, so one fails and berth retries
			// it on its next cycle.
			// Throttle adds to what is left, so the bursts are spread
			// wider than berth's calls.
			n := 2
			if i%3 == 2 {
				n = 4
			}
			f.Throttle("", n)
			select {
			case <-stopThrottle:
				return
			case <-time.After(3 * time.Second):
			}
		}
	}()
	var ids []string
	submit := func(n int, sleep string) {
		for range n {
			ids = append(ids, d.submit("--", fmt.Sprintf("sleep %s; echo job %d on $(basename $HOME)", sleep, len(ids))))
		}
	}

	// Throttling and listing lag.
	submit(6, "0.$((RANDOM % 5))")
	d.waitJobs(3*time.Minute, ids...)

	// kill -9 of the plugin while jobs run; berth restarts it.
	submit(6, "2")
	waitFor(t, time.Minute, "a job to run", func() bool {
		for _, id := range ids[6:] {
			if d.job(id).State == api.JobRunning {
				return true
			}
		}
		return false
	})
	pid := d.health().Plugin.PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "berth to restart the plugin", func() bool {
		h := d.health()
		return h.Plugin != nil && h.Plugin.PID != pid && h.Plugin.Status == "ok"
	})

	// kill -9 of berth at a random moment of the next jobs.
	submit(6, "1.$((RANDOM % 5))")
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Millisecond)
	d.kill9()
	d.start()
	jobs := d.waitJobs(3*time.Minute, ids...)
	close(stopThrottle)
	<-throttled
	ok := 0
	for _, j := range jobs {
		switch {
		case j.State == api.JobSuccess:
			ok++
		case j.State == api.JobFailed && j.Reason != "":
		default:
			t.Errorf("job %s ended %s without a reason", j.ID, j.State)
		}
	}
	// Jobs may fail with a reason (a call that met the dead plugin, a
	// 429 burst beyond the retries), but most must run.
	if ok < len(jobs)/2 {
		t.Errorf("%d of %d jobs succeeded", ok, len(jobs))
	}

	// No leak: idle instances are deleted, and nothing is left that berth
	// does not know.
	waitFor(t, 2*time.Minute, "the scale set to be empty", func() bool {
		return len(f.Live()) == 0 && f.Capacity() == 0 && len(d.instances()) == 0
	})
	capacity, live := watch.result()
	if capacity > maxInstances || live > maxInstances {
		t.Errorf("the scale set held up to %d instances (capacity up to %d); max_instances is %d", live, capacity, maxInstances)
	}
	if f.Calls("Token") == 0 || f.Calls("UpdateScaleSet") == 0 || f.Calls("DeleteInstances") == 0 {
		t.Errorf("calls: Token %d, UpdateScaleSet %d, DeleteInstances %d", f.Calls("Token"), f.Calls("UpdateScaleSet"), f.Calls("DeleteInstances"))
	}
	t.Logf("%d jobs, %d succeeded; %d instances launched in all; most held at once %d", len(jobs), ok, len(f.Instances()), live)
}

// A parked environment survives kill -9 of the plugin and of berth while
// its deallocation is in flight: the restarted plugin lists the instance
// as it is (deallocating, then deallocated) and the resume finds the files.
func TestAzureParkedEnvironmentSurvivesKill9WhileSuspending(t *testing.T) {
	f := startAzureFake(t, azurefake.Options{BootTime: 300 * time.Millisecond, StartTime: 300 * time.Millisecond,
		DeallocateTime: 2 * time.Second, DeleteTime: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond}, nil)
	d := azureDaemon(t, f, "max_instances = 2")
	out, errOut, code := d.berth("submit", "--wait", "--suspend", "--", `echo parked > $HOME/marker; basename $HOME`)
	m := envKeyLine.FindStringSubmatch(errOut)
	if code != 0 || m == nil {
		t.Fatalf("submit --suspend: exit %d: %s", code, errOut)
	}
	host := strings.TrimSpace(out)
	if err := syscall.Kill(d.health().Plugin.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.kill9()
	if in, _ := f.Instance(host); in.Power == azurefake.PowerDeallocated {
		t.Logf("the deallocation of %s finished before the kills", host)
	}
	d.start()
	out, errOut, code = d.berth("submit", "--wait", "--resume", m[1], "--", `cat $HOME/marker; basename $HOME`)
	if code != 0 || out != "parked\n"+host+"\n" {
		t.Fatalf("resume after kill -9: exit %d, output %q (want parked and %s), stderr %s", code, out, host, errOut)
	}
}

// A Spot instance evicted under a running job (eviction policy Delete):
// the job ends as a failure with a reason, and the next job runs on a new
// instance; the set holds nothing berth does not know.
func TestAzureSpotEvictionEndsTheJobAndBerthReplacesTheInstance(t *testing.T) {
	f := startAzureFake(t, azurefake.Options{Spot: true, BootTime: 300 * time.Millisecond, DeleteTime: 200 * time.Millisecond,
		PollInterval: 100 * time.Millisecond}, map[string]any{"suspend": false})
	d := azureDaemon(t, f, "max_instances = 2\n[[autoscaler.policy]]\nidle_count = 0\nidle_time = \"2s\"")
	long := d.submit("--", "echo started; sleep 60")
	var inst string
	// The queue records the job's instance after it marks the job
	// running (jobsource/queue Job.Started): wait for the record, not
	// only for the state, or a busy machine evicts "".
	waitFor(t, time.Minute, "the job to run with its instance recorded", func() bool {
		j := d.job(long)
		inst = j.Instance
		out, _, _ := d.berth("logs", long)
		return j.State == api.JobRunning && inst != "" && strings.Contains(out, "started")
	})
	if err := f.Evict(inst); err != nil {
		t.Fatal(err)
	}
	if j := d.waitJobs(time.Minute, long)[0]; j.State != api.JobFailed || j.Reason == "" {
		t.Errorf("job on the evicted instance: %s (%q); want failed with a reason", j.State, j.Reason)
	}
	// berth hands an instance whose job lost its connection to the next
	// job until a listing shows it gone (a job submitted at once fails
	// as a system failure: "unknown instance"); wait for the listing.
	waitFor(t, time.Minute, "berth to see "+inst+" gone", func() bool {
		for _, in := range d.instances() {
			if in.ID == inst {
				return false
			}
		}
		return true
	})
	out, errOut, code := d.berth("submit", "--wait", "--", "basename $HOME")
	if code != 0 || strings.TrimSpace(out) == inst {
		t.Fatalf("next job: exit %d, ran on %q (evicted %s): %s", code, out, inst, errOut)
	}
	waitFor(t, time.Minute, "the scale set to be empty", func() bool {
		return len(f.Live()) == 0 && f.Capacity() == 0 && len(d.instances()) == 0
	})
}
