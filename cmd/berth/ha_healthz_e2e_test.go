package main

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/etcdtest"
)

// healthzStore is what the test reads of /healthz's etcd view.
type healthzStore struct {
	Status   string   `json:"status"`
	Role     string   `json:"role"`
	Problems []string `json:"problems"`
	Store    *struct {
		Status string `json:"status"`
		Age    *int64 `json:"age_s"`
	} `json:"store"`
}

// promptHealth asks /healthz with a client that gives up after 10 s (it
// used to hang about 60 s while etcd was gone) and fails the test when
// the answer does not come.
func (d *daemon) promptHealth() healthzStore {
	d.t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + d.listen + "/healthz")
	if err != nil {
		d.t.Fatalf("/healthz did not answer: %v", err)
	}
	defer resp.Body.Close()
	var h healthzStore
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		d.t.Fatal(err)
	}
	return h
}

// Issue 43, item 5, with Debian's etcd: /healthz answers at once whatever
// etcd does, frozen (SIGSTOP) or killed, with the last known state and
// its age ("etcd unreachable for 12s", store.age_s), and says ok again
// once etcd is back. On main it asked etcd inside the request.
func TestHAHealthzAnswersWhileEtcdIsFrozenOrGone(t *testing.T) {
	if os.Getenv(etcdtest.BinaryEnv) == "" {
		if _, err := os.Stat("/usr/bin/etcd"); err != nil {
			t.Skipf("needs an etcd binary to freeze (apt install etcd-server, or set %s)", etcdtest.BinaryEnv)
		}
		t.Setenv(etcdtest.BinaryEnv, "/usr/bin/etcd")
	}
	f := newHAFleet(t, 1, haAutoscaler)
	a := f.manager()
	a.waitRole(30*time.Second, "leader")
	if h := a.promptHealth(); h.Store == nil || h.Store.Status != "ok" || h.Store.Age == nil {
		t.Fatalf("/healthz with etcd up: %+v", h)
	}

	unreachable := func(what string) {
		t.Helper()
		waitFor(t, 2*time.Minute, "/healthz to report etcd "+what, func() bool {
			h := a.promptHealth()
			return h.Status == "degraded" && h.Store != nil && h.Store.Status == "unreachable" && h.Store.Age != nil &&
				len(h.Problems) > 0 && strings.Contains(strings.Join(h.Problems, "\n"), "etcd unreachable for")
		})
		// Asked again and again while etcd stays away, /healthz keeps
		// answering, and the age grows.
		first := *a.promptHealth().Store.Age
		waitFor(t, time.Minute, "the age of etcd's last answer to grow", func() bool {
			return *a.promptHealth().Store.Age > first
		})
	}
	back := func() {
		t.Helper()
		waitFor(t, 2*time.Minute, "/healthz to report etcd ok again", func() bool {
			h := a.promptHealth()
			return h.Store != nil && h.Store.Status == "ok"
		})
	}

	if err := f.etcd.SignalMember(0, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := true
	t.Cleanup(func() {
		if frozen {
			f.etcd.SignalMember(0, syscall.SIGCONT)
		}
	})
	unreachable("frozen")
	if err := f.etcd.SignalMember(0, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	frozen = false
	back()

	f.etcd.StopMember(0)
	unreachable("gone")
	if err := f.etcd.RestartMember(0); err != nil {
		t.Fatal(err)
	}
	back()
	a.waitRole(2*time.Minute, "leader")
}
