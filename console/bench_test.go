package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
)

// BenchmarkConsole measures each console page's data request against a
// real fleet of 500 ready instances (simulated provider) and a real queue
// holding 10,000 jobs, with a week of history behind the charts. The bar
// is 50 ms per request.
func BenchmarkConsole(b *testing.B) {
	const instances, jobs = 500, 10000
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := scaler.Config{CapacityPerInstance: 1, MaxInstances: instances,
		Policies:      scaler.FixedPolicy(policy.Policy{IdleCount: instances, IdleTime: time.Hour}),
		ThrottleLimit: 1e6, ThrottleBurst: instances}
	f := fleet.New(scaler.New(cfg, time.Now()), fleet.Options{Provider: sim.New(sim.Config{}, time.Now), Logger: log,
		UpdateInterval: time.Hour, TickInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	for f.Counts().InstancesByPhase["ready"] < instances {
		f.Kick()
		time.Sleep(10 * time.Millisecond)
	}
	q, err := queue.Open(b.TempDir(), queue.WithLogger(log))
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	for i := range jobs {
		if _, err := q.Submit(api.JobRequest{Script: fmt.Sprintf("make test # %d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	c := New(Options{Authenticate: func(string) (api.Principal, bool) { return api.Principal{Name: api.AdminName, Admin: true}, true },
		Fleet: f, Jobs: q, JobAPI: q.Handler(), Logger: log})
	fillWeek(c.History(), f.Instances(), jobs)
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	id, _ := c.sessions.create("tok", time.Now())
	week := fmt.Sprintf("?from=%d", time.Now().Add(-7*24*time.Hour).Unix())
	// jobs?state=success matches none: the list reads all 10,000 records.
	for _, page := range []string{"fleet", "fleet" + week, "jobs", "jobs?state=success", "waits", "waits" + week, "decisions", "health"} {
		b.Run(page, func(b *testing.B) {
			req, _ := http.NewRequest("GET", srv.URL+"/ui/api/"+page, nil)
			req.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
			for b.Loop() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", page, resp.StatusCode)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/req")
		})
	}
}

// fillWeek records a week of samples every 5 s of a fleet the size of views, n job starts with waits
// and a decision every 10 minutes, as a busy berth would have.
func fillWeek(h *History, views []scaler.InstanceView, n int) {
	size := len(views)
	now := time.Now()
	start := now.Add(-7 * 24 * time.Hour)
	for t := start; t.Before(now); t = t.Add(5 * time.Second) {
		busy := size/2 + int(float64(size)*0.4*float64(t.Hour()%12)/12)
		h.Sample(t, scaler.Counts{InstancesByPhase: map[string]int{"ready": busy, "booting": 1 + size/25, "suspended": 1 + size/16},
			Slots: map[string]int{scaler.SlotAcquired: busy * 9 / 10, scaler.SlotIdle: busy - busy*9/10}})
	}
	for i := range n {
		t := start.Add(time.Duration(i) * 7 * 24 * time.Hour / time.Duration(n))
		h.JobStarted(t, JobRef{Source: "queue", ID: fmt.Sprint(i + 1)}, views[i%len(views)].ID, time.Duration(i%97)*time.Second)
	}
	for t := start; t.Before(now); t = t.Add(10 * time.Minute) {
		h.Observe(t, scaler.Sized{Hot: 4, Rate: 0.2, Burst: 3, Source: "last hour", BootTime: time.Minute})
		h.Observe(t, scaler.Scaled{Direction: "up", InUse: 100, IdleSlots: 4, Have: 100, Want: 104, N: 4})
	}
}
