package scaler

import (
	"errors"
	"fmt"
	"time"

	"github.com/berth-ci/berth/policy"
)

// ReasonOperator deletes an instance an operator asked to remove
// (`berth instances delete`).
const ReasonOperator Reason = "deleted_by_operator"

// ErrUnknownInstance is returned by DeleteInstance for an ID the fleet
// does not hold.
var ErrUnknownInstance = errors.New("no such instance in the fleet")

// Outcomes of DeleteInstance.
const (
	// DeleteNow: the instance is being deleted.
	DeleteNow = "deleting"
	// DeleteDraining: the instance takes no new job and is deleted when
	// its running jobs end.
	DeleteDraining = "draining"
	// DeleteKept: the instance holds a job, a booking or a parked
	// environment, and force was not given.
	DeleteKept = "kept"
)

// DeleteInstance removes instance id as an operator asked. It follows the
// rules of berth's own deletes: an instance that holds nothing (every slot
// idle, no parked environment) is deleted at once; one that holds a job, a
// booking or a parked environment is kept, with why, unless force. With
// force a parked environment is dropped (a job resuming it later fails
// with the reason) and an instance with running jobs drains: it takes no
// new job, its unstarted bookings move elsewhere, and it is deleted when
// its jobs end. No running job is ever killed: that is what
// `berth jobs --cancel` is for.
func (s *Scaler) DeleteInstance(id string, force bool) (outcome, why string, err error) {
	in, ok := s.instances[id]
	if !ok {
		return "", "", fmt.Errorf("instance %s: %w", id, ErrUnknownInstance)
	}
	if in.phase == phaseDeleting {
		return DeleteNow, "already being deleted (" + string(in.deleteReason) + ")", nil
	}
	if keep := s.holds(in); keep != "" && !force {
		return DeleteKept, keep + "; --force deletes it anyway (a parked environment is dropped, running jobs finish first)", nil
	}
	if e := in.env; e != nil && e.inUse == nil {
		e.lost = fmt.Sprintf("deleted by an operator (berth instances delete --force) at %s", s.now.UTC().Format(time.RFC3339))
		e.inst = nil
		in.env = nil
		s.emit(EnvEvicted{Key: e.key, InstanceID: id, ParkedFor: s.now.Sub(e.parkedAt), Why: e.lost})
	}
	in.deleteReason = ReasonOperator
	if in.used == 0 && in.env == nil {
		s.deleteInstance(in, ReasonOperator)
		s.scaleUp()
		return DeleteNow, "", nil
	}
	if in.phase != phaseDraining {
		s.setPhase(in, phaseDraining)
	}
	s.parkOthers(in)
	s.bindQueued()
	s.scaleUp()
	if in.used == 0 && in.env == nil {
		s.deleteInstance(in, ReasonOperator)
		return DeleteNow, "", nil
	}
	s.dirty = true
	return DeleteDraining, fmt.Sprintf("deleted when its %d running job(s) end", in.used), nil
}

// holds says what an instance holds that a delete would take away, or "".
func (s *Scaler) holds(in *instance) string {
	acquired, booked := 0, 0
	for _, r := range in.slots {
		switch {
		case r == nil:
		case r.acquired:
			acquired++
		default:
			booked++
		}
	}
	switch {
	case acquired > 0:
		return fmt.Sprintf("runs %d job(s)", acquired)
	case in.env != nil:
		return "holds parked environment " + in.env.key
	case booked > 0:
		return fmt.Sprintf("holds %d booking(s) of jobs about to start", booked)
	}
	return ""
}

// DeleteResult is what DeleteInstance did with one instance: Outcome is
// DeleteNow, DeleteDraining, DeleteKept or "unknown"; Why says why.
type DeleteResult struct {
	ID      string
	Outcome string
	Why     string
}

// Hold stops (true) or restarts (false) the idle pool: while held, no
// instance is kept idle, warm or suspended, whatever the policy says, and
// jobs book on demand (an instance is created for a job that comes, and
// scaled in after idle_time), so an operator who deleted every instance
// (`berth instances delete --all --hold`) sees the fleet stay at zero
// instead of the policy booting a new idle instance at once. Not
// persisted: a restarted berth follows its policy again.
func (s *Scaler) Hold(held bool) { s.held = held }

// Held reports whether the idle pool is held (Hold).
func (s *Scaler) Held() bool { return s.held }

// heldPolicy is p with its idle pool taken away: nothing idle, nothing
// suspended, no wait target, and on-demand booking, without which a job
// would wait for an idle slot that never comes.
func heldPolicy(p policy.Policy) policy.Policy {
	p.IdleCount, p.ScaleFactor, p.ScaleFactorLimit = 0, 0, 0
	p.SuspendedIdleCount, p.TargetWait = 0, 0
	p.Preemptive = false
	return p
}

// SetLimits applies a reloaded config's policy schedule and instance
// limits. Instances past a lower max_instances are not deleted: they leave
// by scale-in as they idle, and no new one is made until the fleet is
// under the limit; jobs already running are not touched.
func (s *Scaler) SetLimits(policies Policies, maxInstances, maxUseCount int) {
	s.cfg.Policies = policies
	s.cfg.MaxInstances = maxInstances
	s.cfg.MaxUseCount = maxUseCount
}
