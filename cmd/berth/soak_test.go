package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// The soak: BERTH_SOAK=N runs N cycles against the real berth binary on real
// sandboxes. Each cycle submits a random mix of plain jobs, jobs that park
// their environment (--suspend) and jobs that resume one (--resume, some of
// them parking it again), waits a random moment and kills berth with
// SIGKILL, then starts it again. At the end it checks that
//
//   - every job ended, and every failed one says why;
//   - every environment berth still holds resumes, with the files its last
//     job left, and no environment a job parked vanished without a job
//     having resumed it;
//   - no sandbox directory or process is left that berth does not list;
//   - berth never had more than max_instances instances, in its own view
//     (sampled all along) nor on disk (sandbox directories).
//
// It is skipped by default (minutes of wall time); BERTH_SOAK_SEED fixes the
// random choices. See docs/reliability.md, "Soak test".
func TestSoak(t *testing.T) {
	cycles, _ := strconv.Atoi(os.Getenv("BERTH_SOAK"))
	if cycles <= 0 {
		t.Skip("set BERTH_SOAK=N to run N kill -9 cycles on real sandboxes (minutes)")
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("BERTH_SOAK_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("soak: %d cycles, BERTH_SOAK_SEED=%d", cycles, seed)
	const maxInstances = 3
	s := &soak{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), jobs: map[string]*soakJob{}}
	// By default eviction is off so that every parked environment must stay
	// resumable, and the soak parks at most maxInstances-1 at once so that
	// plain jobs always have an instance. BERTH_SOAK_EVICT=1 parks up to
	// maxInstances: resumes must still run (they need no new booking) and
	// plain jobs must get an instance by evicting the environment parked
	// longest after environment_evict_after; an environment may then be gone
	// only if berth logged its eviction.
	s.evict = os.Getenv("BERTH_SOAK_EVICT") == "1"
	evictAfter := "0s"
	s.parkLimit = maxInstances - 1
	if s.evict {
		s.parkLimit, evictAfter = maxInstances, "8s"
	}
	t.Logf("soak: parking up to %d environments, environment_evict_after = %s", s.parkLimit, evictAfter)
	s.d = newDaemon(t, fmt.Sprintf(`job_timeout = "2m"
[autoscaler]
max_instances = %d
environment_evict_after = %q
instance_acquire_timeout = "2m"
[[autoscaler.policy]]
idle_count = 1
idle_time = "20s"
`, maxInstances, evictAfter))
	stopSampling := s.sample()
	start := time.Now()
	for c := 1; c <= cycles; c++ {
		s.cycle()
		if t.Failed() {
			stopSampling()
			return
		}
	}
	killed := time.Since(start)

	// Let everything finish on a berth that is left alone.
	ids := s.ids()
	jobs := s.d.waitJobs(5*time.Minute, ids...)
	stopSampling()
	s.checkJobs(jobs)
	s.checkNoOrphans()
	resumed := s.checkParkedResume()
	s.mu.Lock()
	maxSeen, maxDirs, samples := s.maxSeen, s.maxDirs, s.samples
	s.mu.Unlock()
	if maxSeen > maxInstances || maxDirs > maxInstances {
		t.Errorf("max_instances = %d exceeded: berth listed up to %d instances, %d sandbox directories existed at once", maxInstances, maxSeen, maxDirs)
	}
	var ok, failed, resumes, resumesOK int
	reasons := map[string]int{}
	for _, j := range jobs {
		if j.Resume != "" {
			resumes++
			if j.State == api.JobSuccess {
				resumesOK++
			}
		}
		if j.State == api.JobSuccess {
			ok++
		} else {
			failed++
			reasons[shortReason(j.Reason)]++
		}
	}
	evictions := strings.Count(s.logs.String()+s.d.log.String(), "parked environment evicted to make room")
	t.Logf("soak: %d evictions of parked environments for waiting jobs", evictions)
	t.Logf("soak: %d cycles (%d kill -9) in %s; %d jobs: %d succeeded, %d failed %v; %d parked an environment, %d resumed one (%d succeeded), %d still parked resumed with their files at the end; max instances seen %d (sandbox dirs %d) over %d samples, max_instances %d",
		cycles, s.kills, killed.Round(time.Second), len(jobs), ok, failed, reasons, s.parked, resumes, resumesOK, resumed, maxSeen, maxDirs, samples, maxInstances)
}

type soakJob struct {
	id      string
	suspend bool
	resume  string
	token   string // written to /berth/marker when the job parks its environment
}

type soak struct {
	t     *testing.T
	d     *daemon
	rng   *rand.Rand
	jobs  map[string]*soakJob
	order []string
	kills int
	// parked counts environment keys jobs reported.
	parked int
	// evict and parkLimit: see TestSoak. logs holds berth's log from every
	// run before the current one.
	evict     bool
	parkLimit int
	logs      strings.Builder

	mu                        sync.Mutex
	maxSeen, maxDirs, samples int
}

func (s *soak) ids() []string { return append([]string(nil), s.order...) }

// sample records, until stopped, the most instances berth lists and the most
// sandbox directories on disk at once.
func (s *soak) sample() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			qctx, qcancel := context.WithTimeout(ctx, time.Second)
			list, err := s.d.client().Instances(qctx)
			qcancel()
			dirs := 0
			for _, d := range sandboxDirs(s.t, s.d) {
				if !strings.HasPrefix(d, ".") { // .probe-*: the start-up check, not an instance
					dirs++
				}
			}
			s.mu.Lock()
			if err == nil {
				s.maxSeen = max(s.maxSeen, len(list))
				s.samples++
			}
			s.maxDirs = max(s.maxDirs, dirs)
			s.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// state returns every job as berth knows it, and the environment keys it holds.
func (s *soak) state() (map[string]api.Job, map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs := map[string]api.Job{}
	for _, id := range s.order {
		j, err := s.d.client().Job(ctx, id)
		if err != nil {
			s.t.Fatalf("job %s: %v", id, err)
		}
		jobs[id] = j
	}
	list, err := s.d.client().Instances(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	held := map[string]string{}
	for _, in := range list {
		for _, k := range in.EnvKeys {
			held[k] = in.ID
		}
	}
	return jobs, held
}

// markers maps each environment key to the marker its last parking job wrote.
func (s *soak) markers(jobs map[string]api.Job) map[string]string {
	m := map[string]string{}
	for _, id := range s.order { // submission order = queue order
		if j := jobs[id]; j.EnvKey != "" && j.State == api.JobSuccess {
			m[j.EnvKey] = s.jobs[id].token
		}
	}
	return m
}

func (s *soak) submit(req api.JobRequest, sj *soakJob) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := s.d.client().Submit(ctx, req)
	if err != nil {
		s.t.Fatalf("submit %+v: %v", req, err)
	}
	sj.id = j.ID
	s.jobs[j.ID] = sj
	s.order = append(s.order, j.ID)
}

// cycle submits a random mix, waits a random moment and kills berth.
func (s *soak) cycle() {
	jobs, held := s.state()
	markers := s.markers(jobs)
	// Environments that are parked and that no live job is about to use.
	busy := map[string]bool{}
	pendingSuspends := 0
	for _, id := range s.order {
		j := jobs[id]
		if j.State == api.JobQueued || j.State == api.JobRunning {
			if j.Resume != "" {
				busy[j.Resume] = true
			}
			if j.Suspend && j.Resume == "" {
				pendingSuspends++
			}
		}
	}
	var free []string
	for k := range held {
		if !busy[k] && markers[k] != "" {
			free = append(free, k)
		}
	}
	sort.Strings(free)
	for n := 1 + s.rng.IntN(5); n > 0; n-- {
		sleep := fmt.Sprintf("sleep %d.%d", s.rng.IntN(2), s.rng.IntN(10))
		switch r := s.rng.IntN(10); {
		case r < 3 && len(held)+pendingSuspends < s.parkLimit:
			tok := fmt.Sprintf("tok-%d", s.rng.Uint64())
			pendingSuspends++
			s.submit(api.JobRequest{Script: fmt.Sprintf("echo %s > /berth/marker; %s", tok, sleep), Suspend: true}, &soakJob{suspend: true, token: tok})
		case r < 6 && len(free) > 0:
			i := s.rng.IntN(len(free))
			k := free[i]
			free = append(free[:i], free[i+1:]...)
			sj := &soakJob{resume: k}
			script := fmt.Sprintf(`echo "marker=$(cat /berth/marker)"; %s`, sleep)
			req := api.JobRequest{Script: script, Resume: k}
			if s.rng.IntN(2) == 0 { // park it again, with a new marker
				sj.suspend, sj.token = true, fmt.Sprintf("tok-%d", s.rng.Uint64())
				req.Suspend = true
				req.Script += fmt.Sprintf("; echo %s > /berth/marker", sj.token)
			}
			s.submit(req, sj)
		default:
			s.submit(api.JobRequest{Script: "echo plain; " + sleep}, &soakJob{})
		}
	}
	time.Sleep(time.Duration(s.rng.IntN(3000)) * time.Millisecond)
	s.d.kill9()
	s.logs.WriteString(s.d.log.String())
	s.kills++
	s.d.start()
}

// checkJobs: every job ended; a failed one says why; a resume job never saw
// another environment's files.
func (s *soak) checkJobs(jobs []api.Job) {
	for _, j := range jobs {
		sj := s.jobs[j.ID]
		if !j.State.Done() {
			s.t.Errorf("job %s is still %s", j.ID, j.State)
			continue
		}
		if j.State != api.JobSuccess && strings.TrimSpace(j.Reason) == "" {
			s.t.Errorf("job %s ended %s (%s) without a reason", j.ID, j.State, j.Failure)
		}
		if sj.resume != "" {
			if got, ok := s.markerSeen(j.ID); ok {
				if allowed := s.allowedMarkers(jobs, sj.resume, j.ID); !allowed[got] {
					s.t.Errorf("job %s resumed %s and found marker %q, want one of %v: not the files its environment's jobs left", j.ID, sj.resume, got, allowed)
				}
			}
		}
		if j.EnvKey != "" {
			s.parked++
		}
	}
}

// checkNoOrphans: once berth has reconciled, every sandbox directory and
// process belongs to an instance berth lists.
func (s *soak) checkNoOrphans() {
	var orphans []string
	waitFor(s.t, 2*time.Minute, "every sandbox to belong to a listed instance", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		list, err := s.d.client().Instances(ctx)
		if err != nil {
			return false
		}
		known := map[string]bool{}
		for _, in := range list {
			known[in.ID] = true
		}
		orphans = orphans[:0]
		for _, dir := range sandboxDirs(s.t, s.d) {
			if !known[dir] && !strings.HasPrefix(dir, ".") {
				orphans = append(orphans, "directory "+dir)
			}
		}
		for pid, id := range sandboxProcesses(s.d) {
			if !known[id] {
				orphans = append(orphans, fmt.Sprintf("process %d of %s", pid, id))
			}
		}
		return len(orphans) == 0
	})
}

// checkParkedResume: every environment a job parked is either still held by
// berth, or was taken by a later job that resumed it; every held one resumes
// with the marker its last job wrote. It returns how many it resumed.
func (s *soak) checkParkedResume() int {
	jobs, held := s.state()
	markers := s.markers(jobs)
	startedResume := map[string]bool{}
	for _, id := range s.order {
		if j := jobs[id]; j.Resume != "" && j.StartedAt != nil {
			startedResume[j.Resume] = true
		}
	}
	for k := range markers {
		if _, ok := held[k]; !ok && !startedResume[k] && !s.evicted(k) {
			s.t.Errorf("environment %s was parked, no job ever resumed it, and berth no longer holds it", k)
		}
	}
	keys := make([]string, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	list := make([]api.Job, 0, len(s.order))
	for _, id := range s.order {
		list = append(list, jobs[id])
	}
	for _, k := range keys {
		if _, ok := markers[k]; !ok {
			s.t.Errorf("berth holds environment %s that no successful job reported", k)
			continue
		}
		allowed := s.allowedMarkers(list, k, strconv.Itoa(math.MaxInt))
		out, errOut, code := s.d.berth("submit", "--wait", "--resume", k, "--", "cat /berth/marker")
		if code != 0 || !allowed[strings.TrimSpace(out)] {
			s.t.Errorf("resume %s at the end: exit %d, printed %q (want one of %v): %s", k, code, out, allowed, errOut)
		}
	}
	return len(keys)
}

// markerSeen returns the marker a resume job printed, if it got that far.
func (s *soak) markerSeen(id string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	if err := s.d.client().Log(ctx, id, false, &b); err != nil {
		s.t.Fatalf("log of job %s: %v", id, err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if m, ok := strings.CutPrefix(line, "marker="); ok {
			return m, true
		}
	}
	return "", false
}

// allowedMarkers returns the markers a job resuming key may find when it
// starts after the jobs before it (by id): the one the last job that parked
// key successfully wrote, and those of later jobs that resumed key to park
// it again and died with berth (the environment outlives a job that died
// with berth, with what the job left on its disk; docs/semantics.md, "Restart").
func (s *soak) allowedMarkers(jobs []api.Job, key, before string) map[string]bool {
	allowed := map[string]bool{}
	beforeN, _ := strconv.Atoi(before)
	for _, j := range jobs {
		if n, _ := strconv.Atoi(j.ID); n >= beforeN {
			continue
		}
		sj := s.jobs[j.ID]
		switch {
		case j.EnvKey == key && j.State == api.JobSuccess:
			allowed = map[string]bool{sj.token: true} // older markers are overwritten
		case sj.resume == key && sj.token != "" && j.State != api.JobSuccess:
			allowed[sj.token] = true
		}
	}
	return allowed
}

// evicted reports whether berth logged the eviction of environment key.
func (s *soak) evicted(key string) bool {
	if !s.evict {
		return false
	}
	line := "parked environment evicted to make room for queued jobs\" env=" + key
	return strings.Contains(s.logs.String(), line) || strings.Contains(s.d.log.String(), line)
}

func shortReason(r string) string {
	if i := strings.IndexAny(r, ":("); i > 0 {
		r = r[:i]
	}
	return strings.TrimSpace(r)
}
