package bench

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
)

// coreDriver runs jobs through berth's real core, the way the manager's job
// loop does: a booking first (Reserve), then the job, then Acquire, which
// binds at once or is answered later by a Bound action; Release at the end.
// Provider actions the core returns are carried out on the simulated cloud
// at the same virtual instant and reported back.
//
// With late set it is the late-acquire baseline instead: GitLab Runner's
// instance executor before bookings existed (docs/failures.md, failure 1). There,
// the runner checked capacity without booking it: it asked for a job
// whenever the acquisitions it could see (running jobs) were below
// max_instances × capacity_per_instance, so every queued job was taken while
// instances were still booting for earlier ones. Only then did the executor
// try to get an instance — here through the same core's Reserve, retried on
// every tick while it fails, then Acquire — and a job that had no instance
// within the acquire timeout failed with "unable to acquire instance:
// context deadline exceeded". The scaling underneath is berth's own, so the
// difference measured is only where the capacity check happens.
type coreDriver struct {
	r    *runner
	s    *scaler.Scaler
	late bool

	nextPoll time.Time
	nextTick time.Time

	// waiting holds jobs whose acquire timeout runs, in deadline order
	// (deadlines are now + a constant, so FIFO order is deadline order).
	waiting []acqWait
	whead   int
	// taken holds late-acquire jobs taken without a booking, in order.
	taken fifo
	// running counts acquired slots, what the late-acquire check saw.
	running int
	// wokeAt is the fleet size at the last early Tick; see wakeForThrottle.
	wokeAt  int
	listing []scaler.Listed
	keys    []string
	poll    pollState // Config.PollConcurrency > 0: a polling source (poll.go)
}

type acqWait struct {
	job      int
	deadline time.Time
	// failures is the cloud's failure count when the wait began.
	failures int
}

func newCoreDriver(r *runner, late bool) *coreDriver {
	c := r.cfg
	// The suspended tier and the wait target are berth's own; late-acquire
	// keeps today's pool so that it measures only where the capacity check
	// happens.
	tierIdle, target := c.SuspendedIdleTime, c.TargetWait
	if late {
		tierIdle, target = 0, 0
	}
	cfg := scaler.Config{
		CapacityPerInstance: c.CapacityPerInstance,
		MaxInstances:        c.MaxInstances,
		Policies: scaler.FixedPolicy(policy.Policy{
			IdleCount:          c.IdleCount,
			IdleTime:           c.IdleTime,
			ScaleFactor:        c.ScaleFactor,
			ScaleFactorLimit:   c.ScaleFactorLimit,
			Preemptive:         c.Preemptive,
			SuspendedIdleTime:  tierIdle,
			SuspendedIdleCount: c.SuspendedIdleCount,
			TargetWait:         target,
		}),
		CanSuspend:    true,
		SuspendedCost: c.SuspendedCost,
		ProfileZone:   c.Timezone,
		// The core's ready timeout matches the acquire timeout, as with the
		// daemon's instance_acquire_timeout.
		ReadyTimeout: c.AcquireTimeout,
		// No ready hook and no heartbeats: the simulated instances have
		// nothing to run them on, and they would only add provider calls
		// the baselines do not make.
	}
	d := &coreDriver{r: r, s: scaler.New(cfg, r.now), late: late, keys: make([]string, len(r.jobs))}
	return d
}

func (d *coreDriver) key(j int) string {
	if d.keys[j] == "" {
		d.keys[j] = strconv.Itoa(j)
	}
	return d.keys[j]
}

func (d *coreDriver) start() error {
	d.nextPoll, d.nextTick = d.r.now, d.r.now
	return d.step()
}

func (d *coreDriver) nextTimer() time.Time {
	t := d.nextPoll
	if d.nextTick.Before(t) {
		t = d.nextTick
	}
	if d.whead < len(d.waiting) && d.waiting[d.whead].deadline.Before(t) {
		t = d.waiting[d.whead].deadline
	}
	return t
}

func (d *coreDriver) release(j int) error {
	d.s.Advance(d.r.now)
	d.running--
	if err := d.s.Release(d.key(j)); err != nil {
		return fmt.Errorf("release job %d: %w", j, err)
	}
	return d.drain()
}

func (d *coreDriver) step() error {
	r, s := d.r, d.s
	s.Advance(r.now)
	if !r.now.Before(d.nextPoll) {
		d.listing = d.listing[:0]
		if err := r.cloud.Update(r.ctx, func(id string, st provider.State) {
			d.listing = append(d.listing, scaler.Listed{ID: id, State: st})
		}); err != nil {
			return err
		}
		s.Observe(d.listing)
		d.nextPoll = r.now.Add(r.cfg.PollInterval)
	}
	if !d.late && r.cfg.PollConcurrency == 0 {
		// Jobs that arrived since the last step are demand before the
		// Tick decides what is idle, as the queue reports them on arrival.
		s.Queued(r.queue.len())
	}
	tick := !r.now.Before(d.nextTick)
	if tick {
		s.Tick()
		d.nextTick = r.now.Add(r.cfg.TickInterval)
	}
	if err := d.drain(); err != nil {
		return err
	}
	d.timeouts()
	if d.late {
		// The capacity check without a booking: take every job while the
		// acquisitions seen are below the limit.
		limit := r.cfg.MaxInstances * r.cfg.CapacityPerInstance
		fresh := false
		for r.queue.len() > 0 && d.running < limit {
			j := r.queue.pop()
			r.status[j] = stTaken
			d.taken.push(j)
			d.waiting = append(d.waiting, acqWait{job: j, deadline: r.now.Add(r.cfg.AcquireTimeout), failures: d.cloudFailures()})
			fresh = true
		}
		if fresh || tick {
			if err := d.bookTaken(); err != nil {
				return err
			}
		}
	} else if r.cfg.PollConcurrency > 0 {
		if err := d.pollStep(); err != nil {
			return err
		}
	} else {
		// berth: book for queued jobs in order while a booking succeeds; a
		// job leaves the queue only against a booking.
		for r.queue.len() > 0 {
			j := r.queue.peek()
			if err := s.Reserve(d.key(j)); err != nil {
				if errors.Is(err, scaler.ErrNoCapacity) {
					break
				}
				return fmt.Errorf("reserve job %d: %w", j, err)
			}
			r.queue.pop()
			if err := d.acquire(j); err != nil {
				return err
			}
		}
		// Jobs still queued are demand the job source knows (Queued):
		// in preemptive mode they start instances even with idle_count 0.
		s.Queued(r.queue.len())
	}
	if err := d.drain(); err != nil {
		return err
	}
	d.wakeForThrottle()
	return nil
}

// wakeForThrottle schedules the next Tick early when the fleet is below
// what the policy wants, which after a burst means the scale throttle held
// instances back: the core asks again only on its next Tick, and a daemon
// that waits a whole tick interval there would add seconds to every burst.
// The Tick comes when the token bucket is full again, and only while the
// fleet keeps growing, so a shortfall the throttle does not explain (the
// limit, a pause after hook failures) cannot make it spin.
func (d *coreDriver) wakeForThrottle() {
	s, c := d.s, d.r.cfg
	inUse := s.InUse()
	idle := c.IdleCount
	if c.ScaleFactor > 0 {
		idle = max(idle, min(int(math.Ceil(c.ScaleFactor*float64(inUse))), c.ScaleFactorLimit))
	}
	want := min((inUse+idle+c.CapacityPerInstance-1)/c.CapacityPerInstance, c.MaxInstances)
	total := s.Total()
	if total >= want || total == d.wokeAt {
		return
	}
	d.wokeAt = total
	sc := s.Config()
	refill := time.Duration(float64(sc.ThrottleBurst) / sc.ThrottleLimit * float64(time.Second))
	if at := d.r.now.Add(refill); at.Before(d.nextTick) {
		d.nextTick = at
	}
}

// bookTaken is the late-acquire executor: it tries to book for the taken
// jobs in order; one that cannot be booked tries again on the next tick.
func (d *coreDriver) bookTaken() error {
	r := d.r
	for d.taken.len() > 0 {
		j := d.taken.peek()
		if r.status[j] != stTaken {
			d.taken.pop() // timed out
			continue
		}
		if err := d.s.Reserve(d.key(j)); err != nil {
			if errors.Is(err, scaler.ErrNoCapacity) {
				return nil
			}
			return fmt.Errorf("reserve job %d: %w", j, err)
		}
		d.taken.pop()
		if err := d.acquireLate(j); err != nil {
			return err
		}
	}
	return nil
}

// acquire binds job j's booking, starting the acquire timeout if it has to
// wait for an instance.
func (d *coreDriver) acquire(j int) error {
	r := d.r
	// The wait the core steers by runs from the job's arrival in the
	// queue, as the daemon's job source reports it.
	if err := d.s.ArrivedAt(d.key(j), r.jobs[j].Arrival); err != nil {
		return fmt.Errorf("arrived at, job %d: %w", j, err)
	}
	_, ok, err := d.s.Acquire(d.key(j))
	if err != nil {
		return fmt.Errorf("acquire job %d: %w", j, err)
	}
	if ok {
		d.running++
		r.run(j)
		return nil
	}
	r.status[j] = stBooked
	d.waiting = append(d.waiting, acqWait{job: j, deadline: r.now.Add(r.cfg.AcquireTimeout), failures: d.cloudFailures()})
	return nil
}

// acquireLate is acquire for a late-acquire job, whose timeout already runs.
func (d *coreDriver) acquireLate(j int) error {
	_, ok, err := d.s.Acquire(d.key(j))
	if err != nil {
		return fmt.Errorf("acquire job %d: %w", j, err)
	}
	if ok {
		d.running++
		d.r.run(j)
		return nil
	}
	d.r.status[j] = stBooked
	return nil
}

func (d *coreDriver) cloudFailures() int {
	c := d.r.cloud.Counters()
	return c.IncreaseErrors + c.NeverReady + c.Lost
}

// timeouts fails jobs whose acquire timeout is over. A timeout is the
// provider's fault when the core says the booking lost its instance or the
// provider failed to create one, or when the cloud failed at all during
// the wait; otherwise nothing stopped the scaler from having a slot ready,
// and it is a capacity failure.
func (d *coreDriver) timeouts() {
	r, s := d.r, d.s
	for d.whead < len(d.waiting) && !d.waiting[d.whead].deadline.After(r.now) {
		w := d.waiting[d.whead]
		d.whead++
		switch r.status[w.job] {
		case stTaken:
			r.fail(w.job, true, "unable to acquire instance: context deadline exceeded (the job was taken after a capacity check that booked nothing)")
		case stBooked:
			key := d.key(w.job)
			why := s.Why(key)
			provider := d.cloudFailures() > w.failures ||
				strings.HasPrefix(why, "the provider") || strings.HasPrefix(why, "instance ")
			_ = s.Unreserve(key)
			if provider {
				r.fail(w.job, false, "acquire timeout after a provider failure")
			} else {
				r.fail(w.job, true, "acquire timeout without a provider failure")
			}
		}
	}
	if d.whead == len(d.waiting) {
		d.waiting, d.whead = d.waiting[:0], 0
	} else if d.whead > 4096 && d.whead*2 > len(d.waiting) {
		d.waiting = append(d.waiting[:0], d.waiting[d.whead:]...)
		d.whead = 0
	}
}

// drain carries out the core's actions until it has none, as the daemon
// does after every event.
func (d *coreDriver) drain() error {
	r, s := d.r, d.s
	for s.HasReady() {
		acts, _ := s.Ready()
		for _, a := range acts {
			switch a := a.(type) {
			case scaler.Increase:
				n, err := r.cloud.Increase(r.ctx, a.N)
				s.IncreaseResult(a.N, n, err)
			case scaler.Decrease:
				ids := []string{a.ID}
				_, err := r.cloud.Decrease(r.ctx, ids)
				s.DecreaseResult(ids, err)
			case scaler.Bound:
				j, ok := d.jobOf(a.Key)
				if !ok {
					return fmt.Errorf("bound for unknown key %q", a.Key)
				}
				if r.status[j] == stBooked {
					d.running++
					r.run(j)
				}
			case scaler.Lost:
				if j, ok := d.jobOf(a.Key); ok && r.status[j] == stRunning {
					d.running--
					r.fail(j, false, "instance lost while the job ran")
				}
			case scaler.Failed:
				if j, ok := d.jobOf(a.Key); ok && r.status[j] == stBooked {
					r.fail(j, false, "acquire failed: the booking's instance was lost")
				}
			case scaler.Heartbeat:
				s.HeartbeatResult(a.ID, nil)
			case scaler.RunReadyHook:
				s.HookResult(a.ID, nil)
			case scaler.Suspend:
				_, err := r.cloud.Suspend(r.ctx, []string{a.ID})
				s.SuspendResult(a.ID, err)
			case scaler.Resume:
				_, err := r.cloud.Resume(r.ctx, []string{a.ID})
				s.ResumeResult(a.ID, err)
			}
		}
	}
	return nil
}
