package bench

import (
	"sort"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
)

// warmPoolDriver is the fair baseline for berth's suspended tier: the naive
// IdleCount loop plus a pool of stopped instances, as AWS Auto Scaling warm
// pools keep them (initialised once, stopped, started on scale-out, and
// stopped again on scale-in while the pool is short). Under PolicyWarmPool
// the pool has a fixed size (PoolSize); under PolicyScheduled its size
// follows the time of day, from policy periods (a team that knows its 9:00
// ramp and its 02:00 nightly). The pool size is picked by hand, which is
// what berth's target_wait is meant to spare a team.
//
// Unlike naiveDriver it counts every machine it asked for and has not seen
// listed yet, so it stays within max_instances: the comparison is about
// sizing, not about docker+machine's blind spot (failure 2).
type warmPoolDriver struct {
	polled
	sched *policy.Schedule
	// unlisted counts machines asked for and not listed yet; poolUnlisted
	// the part of them asked for to fill the pool.
	unlisted     int
	poolUnlisted int
	// toPool marks machines booted to fill the pool: they are stopped as
	// soon as they run, unless a job takes them first.
	toPool map[*machine]bool
}

func newWarmPoolDriver(r *runner) *warmPoolDriver {
	d := &warmPoolDriver{polled: polled{f: newFleet(r)}, toPool: map[*machine]bool{}}
	if r.cfg.Policy == PolicyScheduled {
		d.sched, _ = policy.NewSchedule(r.cfg.Schedule) // validated in Run
	}
	return d
}

// poolSize is the pool wanted now.
func (d *warmPoolDriver) poolSize() int {
	if d.sched == nil {
		return d.f.r.cfg.PoolSize
	}
	return d.sched.At(d.f.r.now).SuspendedIdleCount
}

func (d *warmPoolDriver) start() error {
	d.startTimers()
	return d.step()
}

func (d *warmPoolDriver) step() error {
	f := d.f
	r := f.r
	if !r.now.Before(d.nextPoll) {
		added, err := f.refresh()
		if err != nil {
			return err
		}
		// New machines are the last ones in the list; the first of them
		// are taken to be the pool's, as the order of the asks does not
		// matter for a pool of identical machines.
		for _, m := range f.list[len(f.list)-added:] {
			if d.poolUnlisted > 0 {
				d.toPool[m] = true
				d.poolUnlisted--
			}
		}
		d.unlisted -= min(added, d.unlisted)
		d.poolUnlisted = min(d.poolUnlisted, d.unlisted)
		d.nextPoll = r.now.Add(r.cfg.PollInterval)
	}
	f.dispatch()
	if err := d.onDemand(); err != nil {
		return err
	}
	if !r.now.Before(d.nextCheck) {
		if err := d.check(); err != nil {
			return err
		}
		d.nextCheck = r.now.Add(r.cfg.CheckInterval)
	}
	return d.stopFresh()
}

// counts returns the machines by what they are for: running idle, coming
// (creating or resuming, free slots), and pooled (stopped or stopping).
func (d *warmPoolDriver) counts() (idle, coming, pooled int) {
	capacity := d.f.r.cfg.CapacityPerInstance
	for _, m := range d.f.list {
		switch m.state {
		case provider.StateRunning:
			if len(m.jobs) == 0 && !d.toPool[m] {
				idle++
			}
		case provider.StateCreating, provider.StateResuming:
			if !d.toPool[m] {
				coming += capacity - len(m.jobs)
			}
		case provider.StateSuspended, provider.StateSuspending:
			pooled++
		}
	}
	return idle, coming, pooled
}

// onDemand starts capacity for waiting jobs that nothing coming covers:
// a stopped pool machine first, a new one otherwise.
func (d *warmPoolDriver) onDemand() error {
	f := d.f
	r := f.r
	capacity := r.cfg.CapacityPerInstance
	_, coming, _ := d.counts()
	short := r.queue.len() - coming - (d.unlisted-d.poolUnlisted)*capacity
	if short <= 0 {
		return nil
	}
	n := (short + capacity - 1) / capacity
	n -= d.resume(n)
	return d.create(n, false)
}

// resume starts up to n stopped pool machines and returns how many.
func (d *warmPoolDriver) resume(n int) int {
	f := d.f
	var ids []string
	for _, m := range f.list {
		if len(ids) == n {
			break
		}
		if m.state == provider.StateSuspended {
			ids = append(ids, m.id)
			m.state = provider.StateResuming
			delete(d.toPool, m)
		}
	}
	if len(ids) == 0 {
		return 0
	}
	if _, err := f.r.cloud.Resume(f.r.ctx, ids); err != nil {
		return 0 // the listing tells what happened; retried on demand
	}
	return len(ids)
}

// create asks for up to n machines within max_instances.
func (d *warmPoolDriver) create(n int, pool bool) error {
	r := d.f.r
	n = min(n, r.cfg.MaxInstances-len(d.f.list)-d.unlisted)
	for range n {
		created, err := r.cloud.Increase(r.ctx, 1)
		d.unlisted += created
		if pool {
			d.poolUnlisted += created
		}
		if err != nil {
			break // retried on the next check
		}
	}
	return nil
}

// check is the IdleCount loop with the pool: keep idle_count hot, return
// idle machines past idle_time to the pool while it is short (delete them
// otherwise), fill the pool up, and shrink it when its window closes.
func (d *warmPoolDriver) check() error {
	f := d.f
	r := f.r
	idle, _, pooled := d.counts()
	want := d.poolSize()
	poolComing := d.poolUnlisted
	for m := range d.toPool {
		if m.state == provider.StateCreating || m.state == provider.StateRunning {
			poolComing++
		}
	}
	if n := r.cfg.IdleCount - idle; n > 0 {
		n -= d.resume(n)
		if err := d.create(n, false); err != nil {
			return err
		}
	} else if excess := idle - r.cfg.IdleCount; excess > 0 {
		var old []*machine
		for _, m := range f.list {
			if m.state == provider.StateRunning && len(m.jobs) == 0 && !d.toPool[m] && r.now.Sub(m.idleSince) >= r.cfg.IdleTime {
				old = append(old, m)
			}
		}
		sort.SliceStable(old, func(i, j int) bool { return old[i].idleSince.Before(old[j].idleSince) })
		for _, m := range old[:min(excess, len(old))] {
			if pooled+poolComing < want {
				d.suspend(m)
				pooled++
				continue
			}
			if err := f.remove(m); err != nil {
				return err
			}
		}
	}
	// Machines busy now come back to the pool when their jobs end: boot
	// for the pool only what they will not fill, or every burst would
	// boot a pool's worth that is deleted when the burst ends.
	busy := 0
	for _, m := range f.list {
		if len(m.jobs) > 0 {
			busy++
		}
	}
	if short := want - pooled - poolComing - busy; short > 0 {
		return d.create(short, true)
	}
	if excess := pooled - want; excess > 0 {
		for _, m := range append([]*machine(nil), f.list...) {
			if excess == 0 {
				break
			}
			if m.state == provider.StateSuspended {
				if err := f.remove(m); err != nil {
					return err
				}
				excess--
			}
		}
	}
	return nil
}

// stopFresh stops pool machines that finished booting and no job took.
func (d *warmPoolDriver) stopFresh() error {
	for m := range d.toPool {
		if _, ok := d.f.byID[m.id]; !ok {
			delete(d.toPool, m) // lost or removed
		}
	}
	for _, m := range d.f.list {
		if !d.toPool[m] {
			continue
		}
		if m.state == provider.StateRunning && len(m.jobs) == 0 {
			d.suspend(m)
		} else if len(m.jobs) > 0 {
			delete(d.toPool, m) // a job took it: it is an ordinary machine now
		}
	}
	return nil
}

// suspend stops m into the pool.
func (d *warmPoolDriver) suspend(m *machine) {
	delete(d.toPool, m)
	if _, err := d.f.r.cloud.Suspend(d.f.r.ctx, []string{m.id}); err == nil {
		m.state = provider.StateSuspending
	}
}
