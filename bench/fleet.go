package bench

import (
	"sort"
	"time"

	"github.com/berth-ci/berth/provider"
)

// fleet is the baselines' own bookkeeping of machines, built only from what
// the provider lists, as docker+machine and a hand-made static pool know
// their machines. It does not use berth's core.
type fleet struct {
	r     *runner
	byID  map[string]*machine
	list  []*machine // in listing (creation) order
	onJob []*machine // the machine each running job uses
	gen   uint64
}

type machine struct {
	id        string
	state     provider.State
	jobs      []int
	idleSince time.Time
	seen      uint64
}

func newFleet(r *runner) *fleet {
	return &fleet{r: r, byID: map[string]*machine{}, onJob: make([]*machine, len(r.jobs))}
}

// refresh lists the provider and returns how many machines it shows for the
// first time. A machine no longer listed that we did not delete is lost,
// with its jobs.
func (f *fleet) refresh() (int, error) {
	r := f.r
	f.gen++
	added := 0
	err := r.cloud.Update(r.ctx, func(id string, st provider.State) {
		if st == provider.StateDeleted || st == provider.StateDeleting {
			return // on its way out; we removed it from our list already
		}
		m := f.byID[id]
		if m == nil {
			m = &machine{id: id, idleSince: r.now}
			f.byID[id] = m
			f.list = append(f.list, m)
			added++
		}
		m.state = st
		m.seen = f.gen
	})
	if err != nil {
		return 0, err
	}
	kept := f.list[:0]
	for _, m := range f.list {
		if m.seen == f.gen {
			kept = append(kept, m)
			continue
		}
		delete(f.byID, m.id)
		for _, j := range m.jobs {
			f.onJob[j] = nil
			if r.status[j] == stRunning {
				r.fail(j, false, "instance lost while the job ran")
			}
		}
	}
	clear(f.list[len(kept):])
	f.list = kept
	return added, nil
}

// dispatch gives free slots on running machines to queued jobs, FIFO.
func (f *fleet) dispatch() {
	r := f.r
	capacity := r.cfg.CapacityPerInstance
	for _, m := range f.list {
		if r.queue.len() == 0 {
			return
		}
		if m.state != provider.StateRunning {
			continue
		}
		for len(m.jobs) < capacity && r.queue.len() > 0 {
			j := r.queue.pop()
			m.jobs = append(m.jobs, j)
			f.onJob[j] = m
			r.run(j)
		}
	}
}

// release frees job j's slot.
func (f *fleet) release(j int) {
	m := f.onJob[j]
	if m == nil {
		return
	}
	f.onJob[j] = nil
	for i, k := range m.jobs {
		if k == j {
			m.jobs = append(m.jobs[:i], m.jobs[i+1:]...)
			break
		}
	}
	if len(m.jobs) == 0 {
		m.idleSince = f.r.now
	}
}

// remove deletes a machine at the provider and forgets it at once, as
// `docker-machine rm` does.
func (f *fleet) remove(m *machine) error {
	delete(f.byID, m.id)
	for i, x := range f.list {
		if x == m {
			f.list = append(f.list[:i], f.list[i+1:]...)
			break
		}
	}
	_, err := f.r.cloud.Decrease(f.r.ctx, []string{m.id})
	return err
}

// staticDriver is a fixed pool: StaticInstances instances are created at
// the start and never deleted, and jobs wait FIFO for a free slot. It is
// what a team without an autoscaler runs, and it bounds what any policy can
// save: the same waits at less cost, or shorter waits at the same cost.
type staticDriver struct {
	f        *fleet
	nextPoll time.Time
}

func newStaticDriver(r *runner) *staticDriver { return &staticDriver{f: newFleet(r)} }

func (d *staticDriver) start() error {
	r := d.f.r
	if _, err := r.cloud.Increase(r.ctx, r.cfg.StaticInstances); err != nil {
		return err
	}
	d.nextPoll = r.now
	return d.step()
}

func (d *staticDriver) nextTimer() time.Time { return d.nextPoll }

func (d *staticDriver) release(j int) error {
	d.f.release(j)
	return nil
}

func (d *staticDriver) step() error {
	r := d.f.r
	if !r.now.Before(d.nextPoll) {
		if _, err := d.f.refresh(); err != nil {
			return err
		}
		d.nextPoll = r.now.Add(r.cfg.PollInterval)
	}
	d.f.dispatch()
	return nil
}

// naiveDriver models docker+machine's autoscaling (docs/failures.md, failure 2),
// with its own machine bookkeeping instead of berth's core:
//
//   - Every check interval (10s) its IdleCount loop takes the provider's
//     machine list, counts idle = listed machines running no job (those
//     still creating included) and creates idle_count − idle more, one
//     create call per machine, bounded by max_instances counted on listed
//     machines only. A machine asked for is invisible until the listing
//     shows it, so during the listing lag every check asks again: that is
//     how docker+machine overshot its limits.
//   - Jobs take a slot on an idle running machine, oldest job first, and
//     otherwise wait. When jobs wait and no idle machine can take them, a
//     machine is created on demand per waiting job, as docker+machine did
//     when a job found no idle machine, while the machines it can see plus
//     the ones it created on demand and cannot see yet are below
//     max_instances. Machines the IdleCount loop created are not in that
//     count until listed — the same blind spot.
//   - Idle machines beyond idle_count are removed once idle for idle_time,
//     oldest idle first, one remove call each.
//
// Machine states are learnt from the listing (every poll interval, as
// berth), so a machine is used once a listing shows it running.
type naiveDriver struct {
	polled
	// onDemand counts machines created for waiting jobs that no listing
	// has shown yet, as the job side of docker+machine knew them.
	onDemand int
}

// polled is what the drivers of the docker+machine-style loops share: the
// fleet they list, and when they next list it and next check the queue.
type polled struct {
	f         *fleet
	nextPoll  time.Time
	nextCheck time.Time
}

func (p *polled) nextTimer() time.Time {
	if p.nextCheck.Before(p.nextPoll) {
		return p.nextCheck
	}
	return p.nextPoll
}

func (p *polled) release(j int) error {
	p.f.release(j)
	return nil
}

// startTimers makes the first listing and check due now.
func (p *polled) startTimers() { p.nextPoll, p.nextCheck = p.f.r.now, p.f.r.now }

func newNaiveDriver(r *runner) *naiveDriver { return &naiveDriver{polled: polled{f: newFleet(r)}} }

func (d *naiveDriver) start() error {
	d.startTimers()
	return d.step()
}

func (d *naiveDriver) step() error {
	f := d.f
	r := f.r
	if !r.now.Before(d.nextPoll) {
		added, err := f.refresh()
		if err != nil {
			return err
		}
		// New machines in the list are taken to be the ones created on
		// demand first; it cannot tell them apart from the IdleCount
		// loop's.
		d.onDemand -= min(added, d.onDemand)
		d.nextPoll = r.now.Add(r.cfg.PollInterval)
	}
	if !r.now.Before(d.nextCheck) {
		if err := d.check(); err != nil {
			return err
		}
		d.nextCheck = r.now.Add(r.cfg.CheckInterval)
	}
	f.dispatch()
	return d.createOnDemand()
}

// check is the IdleCount loop.
func (d *naiveDriver) check() error {
	f := d.f
	r := f.r
	idle := 0
	for _, m := range f.list {
		if len(m.jobs) == 0 {
			idle++
		}
	}
	if n := min(r.cfg.IdleCount-idle, r.cfg.MaxInstances-len(f.list)); n > 0 {
		for range n {
			if _, err := r.cloud.Increase(r.ctx, 1); err != nil {
				break // a failed create is retried on the next check
			}
		}
		return nil
	}
	excess := idle - r.cfg.IdleCount
	if excess <= 0 {
		return nil
	}
	var old []*machine
	for _, m := range f.list {
		if m.state == provider.StateRunning && len(m.jobs) == 0 && r.now.Sub(m.idleSince) >= r.cfg.IdleTime {
			old = append(old, m)
		}
	}
	sort.SliceStable(old, func(i, j int) bool { return old[i].idleSince.Before(old[j].idleSince) })
	for _, m := range old[:min(excess, len(old))] {
		if err := f.remove(m); err != nil {
			return err
		}
	}
	return nil
}

// createOnDemand creates a machine per waiting job that no machine it knows
// of can take.
func (d *naiveDriver) createOnDemand() error {
	f := d.f
	r := f.r
	waiting := r.queue.len()
	if waiting == 0 {
		return nil
	}
	capacity := r.cfg.CapacityPerInstance
	coming := d.onDemand * capacity
	for _, m := range f.list {
		if m.state == provider.StateCreating {
			coming += capacity - len(m.jobs)
		}
	}
	short := waiting - coming
	if short <= 0 {
		return nil
	}
	n := min((short+capacity-1)/capacity, r.cfg.MaxInstances-len(f.list)-d.onDemand)
	for range n {
		created, err := r.cloud.Increase(r.ctx, 1)
		d.onDemand += created
		if err != nil {
			break
		}
	}
	return nil
}
