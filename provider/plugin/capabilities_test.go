package plugin

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/providertest"
	"github.com/berth-ci/berth/sdk"
)

// notes records the notifications a Group delivers.
type notes struct {
	mu  sync.Mutex
	got []string
}

func (n *notes) add(id string, s provider.State) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, id+"="+string(s))
}

func (n *notes) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

// running returns the first instance reported running, or "".
func (n *notes) running() string {
	for _, s := range n.list() {
		if id, ok := strings.CutSuffix(s, "="+string(provider.StateRunning)); ok {
			return id
		}
	}
	return ""
}

// exec runs cmd on instance id over real SSH.
func execOn(t *testing.T, g *Group, id, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ci, err := g.ConnectInfo(ctx, id)
	if err != nil {
		t.Fatalf("ConnectInfo(%s): %v", id, err)
	}
	res, err := providertest.Exec(ctx, ci, cmd, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q on %s: %v, exit %d, stderr %q", cmd, id, err, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

// TestLocalPluginReportsReadinessWithoutAListing: through the real local
// plugin, berth hears of an instance that became running from the
// notification stream, without listing; Notify(nil) stops it.
func TestLocalPluginReportsReadinessWithoutAListing(t *testing.T) {
	g, _ := open(t, localPlugin, "local", "", nil)
	if c := g.Info().Capabilities; !c.Notify || !c.Recycle || !c.Suspend {
		t.Fatalf("Info.Capabilities through the plugin = %+v; want suspend, notify and recycle, as the built-in local provider", c)
	}
	n := &notes{}
	g.Notify(n.add)
	// No Update until the notification came: it alone must tell.
	increaseUntilNotified(t, g, n)
	id := n.running()
	if st := listing(t, g)[id]; st != provider.StateRunning {
		t.Fatalf("notified %s running, but the listing says %q", id, st)
	}

	g.Notify(nil)
	before := len(n.list())
	want := len(listing(t, g)) + 1 // every instance so far, and one more
	if k, err := g.Increase(context.Background(), 1); k != 1 || err != nil {
		t.Fatalf("Increase(1) = %d, %v", k, err)
	}
	waitFor(t, "the last instance to run", func() bool {
		running := 0
		for _, s := range listing(t, g) {
			if s == provider.StateRunning {
				running++
			}
		}
		return running == want
	})
	if got := n.list(); len(got) != before {
		t.Errorf("notifications after Notify(nil) returned: %v", got[before:])
	}
}

// increaseUntilNotified starts instances until the notification stream
// reports one running. The stream opens a moment after Notify (or after a
// restart of the plugin); an instance that becomes running before that is
// learned from a listing only (a lost hint costs latency, not
// correctness). The stream must be open within a few instances.
func increaseUntilNotified(t *testing.T, g *Group, n *notes) {
	t.Helper()
	for attempt := 1; n.running() == ""; attempt++ {
		if attempt > 5 {
			t.Fatal("no notification for 5 new instances: the notification stream is not open")
		}
		if k, err := g.Increase(context.Background(), 1); k != 1 || err != nil {
			t.Fatalf("Increase(1) = %d, %v", k, err)
		}
		for deadline := time.Now().Add(5 * time.Second); n.running() == "" && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestNotificationsFollowAPluginRestart: after the plugin process is killed
// and restarted, the stream is opened again on the new process.
func TestNotificationsFollowAPluginRestart(t *testing.T) {
	g, _ := open(t, localPlugin, "local", "", nil)
	n := &notes{}
	g.Notify(n.add)
	defer g.Notify(nil)
	pid := g.Health().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the plugin to be restarted", func() bool {
		h := g.Health()
		return h.Status == "ok" && h.PID != pid
	})
	increaseUntilNotified(t, g, n)
}

// TestLocalPluginRecyclesAnInstance: through the real local plugin, what a
// job leaves behind (a background process, files in /tmp and /dev/shm) is
// gone after Recycle.
func TestLocalPluginRecyclesAnInstance(t *testing.T) {
	g, _ := open(t, localPlugin, "local", "", nil)
	if k, err := g.Increase(context.Background(), 1); k != 1 || err != nil {
		t.Fatalf("Increase(1) = %d, %v", k, err)
	}
	var id string
	waitFor(t, "the instance to run", func() bool {
		for i, s := range listing(t, g) {
			if s == provider.StateRunning {
				id = i
			}
		}
		return id != ""
	})
	const sleepers = `sleepers() { for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 1000 $'; }
`
	const leftovers = sleepers + `sleepers || true
ls -A /tmp /dev/shm | grep -v ':$' | grep -c . || true`
	execOn(t, g, id, sleepers+`nohup sleep 1000 </dev/null >/dev/null 2>&1 &
i=0; while [ "$(sleepers)" = 0 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
echo left > /tmp/left; echo left > /dev/shm/left`)
	// The leftovers are there while the instance is not recycled: the
	// check below would see them.
	if out := execOn(t, g, id, leftovers); out != "1\n2\n" {
		t.Fatalf("before Recycle, leftovers counted %q; want 1 process and 2 files", out)
	}
	if err := g.Recycle(context.Background(), id); err != nil {
		t.Fatalf("Recycle(%s): %v", id, err)
	}
	if out := execOn(t, g, id, leftovers); out != "0\n0\n" {
		t.Errorf("after Recycle, leftovers counted %q; want none", out)
	}
	if err := g.Recycle(context.Background(), "no-such-instance"); err == nil {
		t.Errorf("Recycle of an unknown instance succeeded")
	}
}

// TestPluginWithoutCapabilitiesIsLikeABuiltInWithout: a plugin that claims
// neither notify, recycle nor requested_size (sim) reports them
// unsupported and never calls the Notify function; nothing fails.
func TestPluginWithoutCapabilitiesIsLikeABuiltInWithout(t *testing.T) {
	g, _ := open(t, simPlugin, "sim", "", nil)
	if c := g.Info().Capabilities; c.Notify || c.Recycle {
		t.Fatalf("Info.Capabilities = %+v; want neither notify nor recycle", c)
	}
	n := &notes{}
	g.Notify(n.add)
	defer g.Notify(nil)
	if k, err := g.Increase(context.Background(), 1); k != 1 || err != nil {
		t.Fatalf("Increase(1) = %d, %v", k, err)
	}
	var id string
	waitFor(t, "the instance to run", func() bool {
		for i, s := range listing(t, g) {
			if s == provider.StateRunning {
				id = i
			}
		}
		return id != ""
	})
	if got := n.list(); len(got) != 0 {
		t.Errorf("notifications from a plugin without the capability: %v", got)
	}
	err := g.Recycle(context.Background(), id)
	if !errors.Is(err, sdk.ErrRecycleUnsupported) || !strings.Contains(err.Error(), "sim") {
		t.Errorf("Recycle = %v; want ErrRecycleUnsupported naming the plugin", err)
	}
	// No requested size either: the fleet takes this answer as "cannot
	// say" and asks no more.
	if g.Info().Capabilities.RequestedSize {
		t.Errorf("Info.Capabilities = %+v; want no requested_size", g.Info().Capabilities)
	}
	if _, err := g.RequestedSize(context.Background()); !errors.Is(err, provider.ErrRequestedSizeUnknown) || !strings.Contains(err.Error(), "sim") {
		t.Errorf("RequestedSize = %v; want ErrRequestedSizeUnknown naming the plugin", err)
	}
}

// TestPrivatePathsReachThePlugin: the local plugin refuses to start when an
// instance would see a path berth keeps private, as the built-in does.
func TestPrivatePathsReachThePlugin(t *testing.T) {
	g := New(Options{Name: "local", Path: localPlugin, CallTimeout: 10 * time.Second})
	defer g.Shutdown(context.Background())
	_, err := g.Init(context.Background(), provider.Settings{StateDir: t.TempDir(), Private: []string{"/usr/share/berth-token"}})
	if err == nil || !strings.Contains(err.Error(), "/usr/share/berth-token") {
		t.Fatalf("Init with a private path under /usr (visible to instances) = %v; want a refusal naming it", err)
	}
}
