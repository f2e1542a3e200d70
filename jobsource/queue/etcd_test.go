package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// manager is one berth manager of an HA test: its own etcd client, its
// elector and its queue on the shared prefix.
type manager struct {
	cli  *clientv3.Client
	el   *ha.Elector
	q    *queue.Queue
	mu   sync.Mutex
	term *ha.Term
	// stale, when set, is the fence a paused leader still believes in.
	stale *ha.Fence
}

func newManager(t *testing.T, prefix, name string) *manager {
	m := &manager{cli: etcdClient(t)}
	m.el = ha.NewElector(m.cli, prefix, 2*time.Second, name, slog.New(slog.DiscardHandler))
	q, err := queue.OpenEtcd(ctx(t), m.cli, prefix+"queue/", m.fence, queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	m.q = q
	return m
}

// fence is the queue's Fence: the current term's, or the stale one a
// paused leader resumes with.
func (m *manager) fence() (string, int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stale != nil {
		return m.stale.Key, m.stale.Rev, true
	}
	if m.term == nil || m.term.Context().Err() != nil {
		return "", 0, false
	}
	f := m.term.Fence()
	return f.Key, f.Rev, true
}

func (m *manager) lead(t *testing.T) {
	t.Helper()
	term, err := m.el.Campaign(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.term = term
	m.mu.Unlock()
}

// pause makes m a paused leader: etcd expires its lease (revoked here, as
// etcd does when no keepalive comes for the TTL), while m, frozen, still
// believes it leads with its old fence.
func (m *manager) pause(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	f := m.term.Fence()
	m.stale = f
	lease := m.term.Lease()
	m.mu.Unlock()
	if _, err := m.cli.Revoke(ctx(t), clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
}

// A value berth cannot read is refused with its full etcd key, so that an
// operator can look at it and delete it; a damaged job is set aside and
// the queue goes on with the others.
func TestEtcdCorruptValueIsRefusedWithItsKey(t *testing.T) {
	prefix := newPrefix(t)
	q := openEtcd(t, prefix, nil)
	cli := etcdClient(t)
	bad, err := q.Submit(api.JobRequest{Script: "echo bad"})
	if err != nil {
		t.Fatal(err)
	}
	good, err := q.Submit(api.JobRequest{Script: "echo good"})
	if err != nil {
		t.Fatal(err)
	}
	key := prefix + "jobs/" + fmt.Sprintf("%020s", bad.ID)
	if _, err := cli.Put(ctx(t), key, `{"id": "1", "state": `); err != nil {
		t.Fatal(err)
	}
	_, err = q.Get(bad.ID)
	var ce *queue.CorruptError
	if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(err.Error(), "etcdctl get/del \""+key+"\"") {
		t.Fatalf("Get of a damaged job = %v, want a CorruptError naming %q", err, key)
	}

	// The job loop is not wedged: the damaged job is set aside with its
	// reason, the next one runs.
	first, err := q.Request(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if first != nil && first.ID() == bad.ID {
		t.Fatalf("the damaged job %s was handed out", bad.ID)
	}
	j, _ := first.(*queue.Job)
	if j == nil {
		j = request(t, q)
	}
	if j.ID() != good.ID {
		t.Fatalf("Request gave job %s, want %s", j.ID(), good.ID)
	}
	_, err = q.Get(bad.ID)
	if !errors.Is(err, queue.ErrNotFound) || !strings.Contains(err.Error(), "quarantined") || !strings.Contains(err.Error(), key) {
		t.Errorf("Get of the quarantined job = %v, want not found, quarantined, naming %q", err, key)
	}

	// A damaged job-ID counter stops submits rather than reuse IDs.
	seq := prefix + "meta/seq"
	if _, err := cli.Put(ctx(t), seq, "many"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(api.JobRequest{Script: "true"}); !errors.As(err, &ce) || ce.Key != seq {
		t.Errorf("Submit with a damaged counter = %v, want a CorruptError naming %q", err, seq)
	}
}

// A paused leader (its lease expired in etcd while it was frozen) resumes
// believing it leads: it can neither take a job nor finish the one it
// ran; etcd refuses both with ErrFenced and nothing changes. A manager
// that knows it does not lead gets ErrNotLeader without asking etcd.
func TestEtcdFencedTakeAndFinishAreRefused(t *testing.T) {
	prefix := newPrefix(t)
	a := newManager(t, prefix, "a")
	standby := newManager(t, prefix, "standby")
	a.lead(t)
	for range 2 {
		if _, err := standby.q.Submit(api.JobRequest{Script: "true"}); err != nil {
			t.Fatalf("a submit through a standby: %v", err)
		}
	}
	running := request(t, a.q)
	if _, err := standby.q.Request(ctx(t)); !errors.Is(err, queue.ErrNotLeader) {
		t.Errorf("a standby's Request = %v, want ErrNotLeader", err)
	}

	a.pause(t)
	if _, err := a.q.Request(ctx(t)); !errors.Is(err, queue.ErrFenced) {
		t.Errorf("the paused leader's Request = %v, want ErrFenced", err)
	}
	if jobs, err := a.q.RequestBatch(ctx(t), 5); !errors.Is(err, queue.ErrFenced) || len(jobs) != 0 {
		t.Errorf("the paused leader's RequestBatch = %d jobs, %v; want none and ErrFenced", len(jobs), err)
	}
	err := running.Finish(ctx(t), jobsource.Result{})
	if !errors.Is(err, queue.ErrFenced) {
		t.Errorf("the paused leader's Finish = %v, want ErrFenced", err)
	}
	got, err := standby.q.Get(running.ID())
	if err != nil || got.State != api.JobRunning {
		t.Errorf("after the fenced Finish the job is %+v, %v; want still running", got, err)
	}
	if n, err := standby.q.Len(); err != nil || n != 1 {
		t.Errorf("queued after the fenced takes = %d, %v; want 1", n, err)
	}
}

// Old leader A is paused with jobs running; B takes over. Throughout, the
// two queues on one prefix never hand out one job twice; B fails A's
// running job for the failover (docs/semantics.md: failed, not requeued)
// and runs every other job.
func TestEtcdTwoLeadersNeverHandOutAJobTwice(t *testing.T) {
	prefix := newPrefix(t)
	a := newManager(t, prefix, "a")
	b := newManager(t, prefix, "b")
	const n = 30
	for range n {
		if _, err := b.q.Submit(api.JobRequest{Script: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	a.lead(t)
	var mu sync.Mutex
	handed := map[string]string{}
	take := func(m *manager, name string) (jobsource.Job, error) {
		j, err := m.q.Request(ctx(t))
		if j != nil {
			mu.Lock()
			if prev, ok := handed[j.ID()]; ok {
				t.Errorf("job %s handed out to %s and to %s", j.ID(), prev, name)
			}
			handed[j.ID()] = name
			mu.Unlock()
		}
		return j, err
	}
	var aJobs []jobsource.Job
	for range 5 {
		j, err := take(a, "a")
		if err != nil || j == nil {
			t.Fatalf("a's take: %v, %v", j, err)
		}
		aJobs = append(aJobs, j)
	}
	if err := aJobs[0].Finish(ctx(t), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}

	a.pause(t)
	b.lead(t)
	// Both try at once: A, resumed, with its stale fence; B, the leader.
	var wg sync.WaitGroup
	wg.Go(func() {
		for range n {
			// Refused, or nothing left to take: never a job.
			if j, err := take(a, "a"); j != nil || (err != nil && !errors.Is(err, queue.ErrFenced)) {
				t.Errorf("the old leader's take after the takeover = %v, %v; want ErrFenced", j, err)
				return
			}
		}
	})
	var bJobs []jobsource.Job
	wg.Go(func() {
		for {
			j, err := take(b, "b")
			if err != nil {
				t.Errorf("the new leader's take: %v", err)
				return
			}
			if j == nil {
				return
			}
			bJobs = append(bJobs, j)
		}
	})
	wg.Wait()
	if len(bJobs) != n-5 || len(handed) != n {
		t.Errorf("b took %d jobs, %d handed out in all; want %d and %d", len(bJobs), len(handed), n-5, n)
	}
	checkFailedOver(t, b.q, aJobs)
	for _, j := range bJobs {
		if err := j.Finish(ctx(t), jobsource.Result{}); err != nil {
			t.Errorf("b's Finish of %s: %v", j.ID(), err)
		}
	}
	// A job whose environment A parked before it lost its term gets its
	// result back, as after a restart.
	ok, err := b.q.RecoverResult(aJobs[1].ID(), jobsource.Result{EnvKey: "env-a", Instance: "i-a"})
	if got, _ := b.q.Get(aJobs[1].ID()); err != nil || !ok || got.State != api.JobSuccess || got.EnvKey != "env-a" {
		t.Errorf("RecoverResult after a failover = %v, %v; job %+v", ok, err, got)
	}
}

// checkFailedOver checks what a takeover left of the old leader's jobs:
// the first one it finished keeps its result, the others failed for the
// failover, with the reason in their state and their log.
func checkFailedOver(t *testing.T, q *queue.Queue, aJobs []jobsource.Job) {
	t.Helper()
	// A's four unfinished jobs failed for the failover, with the reason,
	// and the log says so; the one it finished kept its result.
	for i, j := range aJobs {
		got, err := q.Get(j.ID())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if got.State != api.JobSuccess {
				t.Errorf("a's finished job %s is %s", j.ID(), got.State)
			}
			continue
		}
		if got.State != api.JobFailed || got.Reason != queue.FailoverReason {
			t.Errorf("a's running job %s after the takeover: %s %q, want failed with %q", j.ID(), got.State, got.Reason, queue.FailoverReason)
		}
	}
	if in := q.Interrupted(); len(in) != 4 {
		t.Errorf("Interrupted after the takeover lists %d jobs, want 4", len(in))
	}
	var log bytes.Buffer
	_, c := serve(t, q)
	if err := c.Log(ctx(t), aJobs[1].ID(), false, &log); err != nil || !strings.Contains(log.String(), queue.FailoverReason) {
		t.Errorf("log of a failed-over job = %q, %v", log.String(), err)
	}
}

// A manager that leads again keeps the jobs it still runs: TakeOver fails
// only jobs nobody here runs.
func TestEtcdTakeOverKeepsTheJobsThisManagerRuns(t *testing.T) {
	prefix := newPrefix(t)
	a := newManager(t, prefix, "a")
	other := openEtcd(t, prefix+"queue/", nil) // a manager that led before, fence-free here
	for range 2 {
		if _, err := other.Submit(api.JobRequest{Script: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	orphan := request(t, other) // its manager is gone
	a.lead(t)
	mine := request(t, a.q) // TakeOver ran first: the orphan failed
	if got, _ := a.q.Get(orphan.ID()); got.State != api.JobFailed || got.Reason != queue.FailoverReason {
		t.Errorf("the previous leader's job after the takeover: %+v", got)
	}
	failed, err := a.q.TakeOver() // a new term of the same manager
	if err != nil || len(failed) != 0 {
		t.Errorf("TakeOver again = %v, %v; want nothing failed", failed, err)
	}
	if err := mine.Finish(ctx(t), jobsource.Result{}); err != nil {
		t.Errorf("Finish of a job kept across TakeOver: %v", err)
	}
}

// Two optimistic takers on one prefix (no fence: both succeed at writing)
// contend for the same jobs: each job is handed out once.
func TestEtcdConcurrentTakersNeverShareAJob(t *testing.T) {
	prefix := newPrefix(t)
	qs := []*queue.Queue{openEtcd(t, prefix, nil), openEtcd(t, prefix, nil)}
	const n = 40
	for range n {
		if _, err := qs[0].Submit(api.JobRequest{Script: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for i := range 4 {
		q := qs[i%2]
		wg.Go(func() {
			for {
				var jobs []jobsource.Job
				var err error
				if i < 2 {
					var j jobsource.Job
					j, err = q.Request(context.Background())
					if j != nil {
						jobs = append(jobs, j)
					}
				} else {
					jobs, err = q.RequestBatch(context.Background(), 3)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					seen[j.ID()]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d distinct jobs handed out, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("job %s handed out %d times", id, k)
		}
	}
}

// Submits from two managers at once get distinct IDs, and the queue hands
// the jobs out in ID order.
func TestEtcdConcurrentSubmitsGetDistinctIDsInOrder(t *testing.T) {
	prefix := newPrefix(t)
	qs := []*queue.Queue{openEtcd(t, prefix, nil), openEtcd(t, prefix, nil)}
	const per = 25
	var mu sync.Mutex
	var ids []uint64
	var wg sync.WaitGroup
	for _, q := range qs {
		for range 2 {
			wg.Go(func() {
				for range per {
					j, err := q.Submit(api.JobRequest{Script: "true"})
					if err != nil {
						t.Error(err)
						return
					}
					n, _ := strconv.ParseUint(j.ID, 10, 64)
					mu.Lock()
					ids = append(ids, n)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for i, id := range ids {
		if id != uint64(i+1) {
			t.Fatalf("IDs %v: want 1..%d, each once", ids, 4*per)
		}
	}
	for want := 1; want <= len(ids); want++ {
		j := request(t, qs[want%2])
		if j.ID() != strconv.Itoa(want) {
			t.Fatalf("take %d gave job %s: not in ID order", want, j.ID())
		}
	}
}

// A job's log goes to etcd in chunks of at most 64 KiB, reads back whole,
// and is capped: output past the cap is dropped with a note.
func TestEtcdLogIsChunkedAndCapped(t *testing.T) {
	prefix := newPrefix(t)
	q := openEtcd(t, prefix, nil, queue.WithMaxLogBytes(200<<10))
	_, c := serve(t, q)
	sub, err := q.Submit(api.JobRequest{Script: "yes"})
	if err != nil {
		t.Fatal(err)
	}
	j := request(t, q)
	line := bytes.Repeat([]byte("y"), 1023)
	line = append(line, '\n')
	for range 300 { // 300 KiB
		if n, err := j.Log().Write(line); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := j.Finish(ctx(t), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := c.Log(ctx(t), sub.ID, false, &log); err != nil {
		t.Fatal(err)
	}
	want := string(bytes.Repeat(line, 200)) + "\n[berth] the log reached its limit of 204800 bytes; further output is dropped\n"
	if log.String() != want {
		t.Errorf("log is %d bytes ending %q; want %d bytes", log.Len(), log.String()[max(0, log.Len()-80):], len(want))
	}
	resp, err := etcdClient(t).Get(ctx(t), prefix+"logs/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if len(kv.Value) > 64<<10 {
			t.Errorf("chunk %s holds %d bytes, over 64 KiB", kv.Key, len(kv.Value))
		}
	}
	if len(resp.Kvs) < 4 {
		t.Errorf("the log is %d chunks, want at least 4 of <= 64 KiB", len(resp.Kvs))
	}
}

// A standby's submit wakes the leader's job loop, and a cancel asked of
// the standby reaches the job the leader runs (both through etcd's watch).
func TestEtcdStandbySubmitAndCancelReachTheLeader(t *testing.T) {
	prefix := newPrefix(t)
	leader := openEtcd(t, prefix, nil)
	standby := openEtcd(t, prefix, nil)
	woke := make(chan error, 1)
	go func() { woke <- leader.WaitForJobs(ctx(t)) }()
	sub, err := standby.Submit(api.JobRequest{Script: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatalf("the leader's WaitForJobs = %v", err)
	}
	j := request(t, leader)
	if _, err := standby.Cancel(sub.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-j.Canceled():
	case <-ctx(t).Done():
		t.Fatal("the cancel asked of the standby never reached the running job")
	}
}

// The queue refuses the fleet state's own prefix: their keys would mix.
func TestEtcdQueueRefusesTheFleetStatePrefix(t *testing.T) {
	prefix := newPrefix(t)
	cli := etcdClient(t)
	if _, err := ha.OpenStore(ctx(t), cli, prefix); err != nil {
		t.Fatal(err)
	}
	_, err := queue.OpenEtcd(ctx(t), cli, prefix, nil)
	if err == nil || !strings.Contains(err.Error(), prefix+"queue/") {
		t.Fatalf("OpenEtcd on the state's prefix = %v, want a refusal naming %squeue/", err, prefix)
	}
	q, err := queue.OpenEtcd(ctx(t), cli, prefix+"queue/", nil)
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
}

// A list reads jobs and their scripts page by page: across pages every
// job comes with its own script, oldest first.
func TestEtcdListAcrossPages(t *testing.T) {
	q := openEtcd(t, newPrefix(t), nil)
	const n = 150
	for i := 1; i <= n; i++ {
		if _, err := q.Submit(api.JobRequest{Script: "echo " + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := q.Cancel(strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, err := q.List("", 0)
	if err != nil || len(all) != n {
		t.Fatalf("List = %d jobs, %v; want %d", len(all), err, n)
	}
	for i, j := range all {
		if j.ID != strconv.Itoa(i+1) || j.Script != "echo "+j.ID {
			t.Fatalf("job %d of the list is %s with script %q", i, j.ID, j.Script)
		}
	}
	canceled, err := q.List(api.JobCanceled, 70)
	if err != nil || len(canceled) != 70 || canceled[69].ID != "150" || canceled[0].ID != "12" || canceled[0].Script != "echo 12" {
		t.Fatalf("List(canceled, 70) = %d jobs from %v to %v, %v", len(canceled), canceled[0], canceled[len(canceled)-1], err)
	}
}

// A job this manager keeps running while it is briefly not the leader
// (between two terms) loses no output: chunks that could not be written
// wait and go out with the next term's fence.
func TestEtcdLogSurvivesAGapBetweenTerms(t *testing.T) {
	prefix := newPrefix(t)
	cli := etcdClient(t)
	put := func(key string) int64 {
		resp, err := cli.Put(ctx(t), key, "")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	var mu sync.Mutex
	key, rev, leads := prefix+"election/1", put(prefix+"election/1"), true
	fence := func() (string, int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		return key, rev, leads
	}
	q := openEtcd(t, prefix+"queue/", fence)
	_, c := serve(t, q)
	sub, err := q.Submit(api.JobRequest{Script: "yes"})
	if err != nil {
		t.Fatal(err)
	}
	j := request(t, q)
	out := bytes.Repeat([]byte("0123456789abcde\n"), 6<<10) // 96 KiB: past a chunk
	mu.Lock()
	leads = false
	mu.Unlock()
	j.Log().Write(out[:70<<10]) // a full chunk: its write is refused, kept
	mu.Lock()
	key, rev, leads = prefix+"election/2", put(prefix+"election/2"), true
	mu.Unlock()
	j.Log().Write(out[70<<10:])
	if err := j.Finish(ctx(t), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	got, _ := q.Get(sub.ID)
	var log bytes.Buffer
	if err := c.Log(ctx(t), sub.ID, false, &log); err != nil {
		t.Fatal(err)
	}
	if got.State != api.JobSuccess || !bytes.Equal(log.Bytes(), out) {
		t.Errorf("job %s %q, log of %d bytes; want success and the %d bytes written", got.State, got.Reason, log.Len(), len(out))
	}
}

// RequestResume looks at every queued resume job to find a runnable one:
// with many ahead of it, the take still fits in one etcd transaction
// (records only looked at are not compared at commit).
func TestEtcdRequestResumePastManyWaitingResumeJobs(t *testing.T) {
	q := openEtcd(t, newPrefix(t), nil)
	for i := range 200 {
		if _, err := q.Submit(api.JobRequest{Script: "true", Resume: "env-busy-" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := q.Submit(api.JobRequest{Script: "true", Resume: "env-free"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := q.RequestResume(ctx(t), func(key string) bool { return key == "env-free" })
	if err != nil || j == nil || j.ID() != want.ID {
		t.Fatalf("RequestResume = %v, %v; want job %s", j, err, want.ID)
	}
}

// A commit whose reply is lost is looked for before it is reported as
// failed: its writes are recognised once applied, and not before.
func TestEtcdAppliedRecognisesItsOwnCommit(t *testing.T) {
	q := openEtcd(t, newPrefix(t), nil)
	before, after, err := queue.AppliedAroundCommit(q)
	if err != nil || before || !after {
		t.Errorf("applied before commit = %v, after = %v (%v); want false then true", before, after, err)
	}
}

// The queue carries on through the loss of one of three etcd members:
// every job is taken once and finished, none is left queued or running.
// A write that fails while etcd elects a new raft leader is tried again by
// the caller, as a job loop does.
func TestEtcdQueueSurvivesTheLossOfOneMember(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	q, err := queue.OpenEtcd(ctx(t), cli, "/berth/queue/", nil, queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	retry := func(what string, op func() error) {
		t.Helper()
		var err error
		for range 20 {
			if err = op(); err == nil || !errors.Is(err, queue.ErrWrite) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	const n = 20
	for range n {
		if _, err := q.Submit(api.JobRequest{Script: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	taken := map[string]bool{}
	for i := 0; len(taken) < n; i++ {
		if i == 5 {
			c.StopMember(0)
		}
		var j jobsource.Job
		retry("take", func() (err error) { j, err = q.Request(ctx(t)); return err })
		if j == nil {
			t.Fatalf("no job to take after %d of %d", len(taken), n)
		}
		if taken[j.ID()] {
			t.Fatalf("job %s taken twice", j.ID())
		}
		taken[j.ID()] = true
		tries := 0
		retry("finish", func() error {
			tries++
			err := j.Finish(ctx(t), jobsource.Result{})
			if tries > 1 && errors.Is(err, queue.ErrFinished) {
				return nil // the failed try had applied after all
			}
			return err
		})
	}
	var left []api.Job
	retry("list", func() (err error) { left, err = q.List("", 0); return err })
	for _, j := range left {
		if j.State != api.JobSuccess {
			t.Errorf("job %s ended %s %q", j.ID, j.State, j.Reason)
		}
	}
}
