package scaler

import (
	"time"

	"github.com/berth-ci/berth/provider"
)

// Instance, slot and queue bookkeeping: the helpers every transition uses to
// keep byPhase, the free list and offCurrentUsed consistent.

// phase is the core's view of an instance, finer than the provider's state.
type phase uint8

const (
	phaseCreating    phase = iota // requested or listed creating
	phaseBooting                  // provider says running; ready hook pending
	phaseReady                    // takes bookings
	phaseDraining                 // takes no bookings; deleted when its slots are free
	phaseDeleting                 // Decrease issued
	phaseSuspendWait              // an environment is parked; other slots finishing
	phaseSuspending               // Suspend issued
	phaseSuspended                // provider says suspended
	phaseResuming                 // Resume issued
	phaseRestored                 // loaded from the store; the next listing decides
	numPhases
)

var phaseNames = [numPhases]string{"creating", "booting", "ready", "draining", "deleting",
	"suspend_wait", "suspending", "suspended", "resuming", "restored"}

func (p phase) String() string { return phaseNames[p] }

// current reports whether the phase counts as a running (or soon running)
// instance for the scaling decision.
func (p phase) current() bool {
	return p == phaseCreating || p == phaseBooting || p == phaseReady || p == phaseResuming
}

type instance struct {
	id        string
	phase     phase
	slots     []*reservation // nil = free
	used      int            // slots held by reservations
	env       *env           // environment parked on (or resumed from) this instance
	useCount  int
	created   time.Time
	readyAt   time.Time
	idleSince time.Time // last moment used became 0
	freeIdx   int       // position in Scaler.free, -1 if absent

	provState    provider.State
	restoredFrom phase // phase recorded in the store, for phaseRestored

	hookFails   int
	nextHook    time.Time
	hookPending bool
	// needsReset: found running with no record of what ran on it; it takes
	// no booking until the caller reset it (Config.ResetAdopted).
	needsReset bool
	lastErr    string

	hbFails    int
	nextHB     time.Time
	hbInFlight bool

	suspendFails int
	nextSuspend  time.Time

	deleteReason Reason
	nextDecrease time.Time
	unclaimedAt  time.Time // first seen suspended without environment

	// pooled marks a member of the suspended idle tier: suspending or
	// suspended, holding no environment, belonging to nobody (see tier.go).
	pooled      bool
	pooledAt    time.Time // suspended since
	poolIdx     int       // position in Scaler.pool, -1 if absent
	requested   time.Time // when the Increase that made it was decided
	resumeAt    time.Time // when a tier resume was issued
	resumeFails int
}

func (in *instance) freeSlots() int {
	n := len(in.slots) - in.used
	if in.env != nil && in.slots[in.env.slot] == nil {
		n-- // the parked environment holds its slot
	}
	return n
}

type reservation struct {
	key      string
	inst     *instance // nil while unbound
	slot     int
	acquired bool
	// connected: the job reached its instance (Connected); only then does
	// losing the instance lose the job, with Config.ConfirmConnect.
	connected bool
	waiting   bool // an Acquire or Resume waits for Bound/Failed
	queued    bool // in Scaler.queue
	env       *env // set when the reservation resumes an environment
	lost      string
	arrived   bool // counted by the arrival model
	// arrivedAt is when the job arrived in its source (ArrivedAt) or else
	// was taken (its first Acquire), to learn its wait (refill.go).
	arrivedAt time.Time
	// startedAt is when the job got its slot, to learn how long jobs run
	// (returns.go); zero for a job restored from state.
	startedAt time.Time
}

type env struct {
	key      string
	inst     *instance
	instID   string
	slot     int
	state    []byte
	parkedAt time.Time
	inUse    *reservation // the job that resumed it
	lost     string       // why its instance is gone
}

func (s *Scaler) setPhase(in *instance, p phase) {
	if in.phase == p {
		return
	}
	wasCurrent := in.phase.current()
	s.byPhase[in.phase]--
	in.phase = p
	s.byPhase[p]++
	if wasCurrent != p.current() {
		if wasCurrent {
			s.offCurrentUsed += in.used
		} else {
			s.offCurrentUsed -= in.used
		}
	}
	if in.pooled && p != phaseSuspending && p != phaseSuspended {
		s.setPooled(in, false)
	}
	s.updateFree(in)
	s.updatePool(in)
	s.dirty = true
}

func (s *Scaler) updateFree(in *instance) {
	want := in.phase == phaseReady && in.freeSlots() > 0
	if want && in.freeIdx < 0 {
		in.freeIdx = len(s.free)
		s.free = append(s.free, in)
	} else if !want && in.freeIdx >= 0 {
		last := s.free[len(s.free)-1]
		s.free[in.freeIdx] = last
		last.freeIdx = in.freeIdx
		s.free = s.free[:len(s.free)-1]
		in.freeIdx = -1
	}
}

func (s *Scaler) addInstance(id string, p phase) *instance {
	in := &instance{id: id, phase: p, slots: make([]*reservation, s.cfg.CapacityPerInstance),
		created: s.now, idleSince: s.now, freeIdx: -1, poolIdx: -1}
	s.instances[id] = in
	s.sortedOK = false
	s.byPhase[p]++
	s.updateFree(in)
	s.dirty = true
	return in
}

func (s *Scaler) removeInstance(in *instance, reason Reason) {
	s.setPhase(in, phaseDeleting) // leaves the free list and the counts of current
	s.byPhase[phaseDeleting]--
	delete(s.instances, in.id)
	s.sortedOK = false
	s.emit(Gone{ID: in.id, Reason: reason, Lifetime: s.now.Sub(in.created)})
	s.dirty = true
}

// bind puts r on a free slot of in.
func (s *Scaler) bind(r *reservation, in *instance) {
	for i, h := range in.slots {
		if h == nil && !(in.env != nil && in.env.slot == i) {
			in.slots[i] = r
			r.inst, r.slot = in, i
			in.used++
			if !in.phase.current() {
				s.offCurrentUsed++
			}
			s.updateFree(in)
			return
		}
	}
	panic("scaler: bind on a full instance " + in.id)
}

// unbind frees r's slot.
func (s *Scaler) unbind(r *reservation) {
	in := r.inst
	if in.slots[r.slot] != r {
		// A resume that has not completed holds no slot yet.
		r.inst = nil
		return
	}
	in.slots[r.slot] = nil
	in.used--
	if !in.phase.current() {
		s.offCurrentUsed--
	}
	if r.acquired {
		s.acquired--
	}
	r.inst, r.acquired, r.connected = nil, false, false
	if in.used == 0 {
		in.idleSince = s.now
	}
	s.updateFree(in)
}

// bindQueued gives free slots to unbound reservations, oldest first.
func (s *Scaler) bindQueued() {
	for s.qhead < len(s.queue) && len(s.free) > 0 {
		r := s.queue[s.qhead]
		s.queue[s.qhead] = nil
		s.qhead++
		if !r.queued {
			continue
		}
		r.queued = false
		s.bind(r, s.free[len(s.free)-1])
		if r.waiting {
			r.waiting = false
			r.acquired = true
			s.started(r)
			s.acquired++
			s.emit(Bound{Key: r.key, InstanceID: r.inst.id})
			if r.env == nil && !r.arrivedAt.IsZero() {
				s.observeWait(s.now.Sub(r.arrivedAt))
			}
		}
	}
	if s.qhead == len(s.queue) {
		s.queue, s.qhead = s.queue[:0], 0
	} else if s.qhead > 1024 && s.qhead*2 > len(s.queue) {
		s.queue = append(s.queue[:0], s.queue[s.qhead:]...)
		s.qhead = 0
	}
}

func (s *Scaler) enqueue(r *reservation, front bool) {
	r.queued = true
	if front && s.qhead > 0 {
		s.qhead--
		s.queue[s.qhead] = r
		return
	}
	if front {
		s.queue = append([]*reservation{r}, s.queue[s.qhead:]...)
		s.qhead = 0
		return
	}
	s.queue = append(s.queue, r)
}
