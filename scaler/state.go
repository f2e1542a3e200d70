package scaler

import (
	"fmt"
	"sort"
	"time"
)

// State is the core's durable state: what must survive a restart or crash.
// The caller persists it (see Ready) before carrying out provider actions, so
// that an intent such as an Increase is recorded before the provider call.
type State struct {
	Instances    []InstanceRecord    `json:"instances"`
	Reservations []ReservationRecord `json:"reservations"`
	Envs         []EnvRecord         `json:"environments"`
	// Pending holds the request times of instances asked for but not yet listed.
	Pending []time.Time `json:"pending"`
	// Arrivals is the learned arrival pattern (forecast.go); nil until the
	// first job arrived.
	Arrivals *ArrivalModel `json:"arrivals,omitempty"`
	// Learned is what the core learned beyond the pattern (learned.go),
	// snapshotted once a minute and at stop; nil until then.
	Learned *Learned `json:"learned,omitempty"`
}

// InstanceRecord is one instance in State.
type InstanceRecord struct {
	ID           string    `json:"id"`
	Phase        string    `json:"phase"`
	UseCount     int       `json:"use_count"`
	Created      time.Time `json:"created"`
	DeleteReason Reason    `json:"delete_reason,omitempty"`
	// NeedsReset: found running with no record of what ran on it, and not
	// reset yet (Config.ResetAdopted).
	NeedsReset bool `json:"needs_reset,omitempty"`
}

// ReservationRecord is one booking in State.
type ReservationRecord struct {
	Key        string `json:"key"`
	InstanceID string `json:"instance_id,omitempty"`
	Acquired   bool   `json:"acquired"`
}

// EnvRecord is one parked environment in State.
type EnvRecord struct {
	Key        string    `json:"key"`
	InstanceID string    `json:"instance_id"`
	Slot       int       `json:"slot"`
	State      []byte    `json:"state"`
	ParkedAt   time.Time `json:"parked_at"`
	// ResumedBy is the booking key of the job that resumed it, if any.
	ResumedBy string `json:"resumed_by,omitempty"`
	// Lost says why its instance is gone; such an environment can no longer be resumed.
	Lost string `json:"lost,omitempty"`
}

// State returns the durable state.
func (s *Scaler) State() State {
	var st State
	for _, in := range s.sortedInstances() {
		st.Instances = append(st.Instances, InstanceRecord{ID: in.id, Phase: in.phase.String(),
			UseCount: in.useCount, Created: in.created, DeleteReason: in.deleteReason, NeedsReset: in.needsReset})
	}
	keys := make([]string, 0, len(s.res))
	for k := range s.res {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r := s.res[k]
		rec := ReservationRecord{Key: k, Acquired: r.acquired}
		if r.inst != nil {
			rec.InstanceID = r.inst.id
		}
		st.Reservations = append(st.Reservations, rec)
	}
	for _, k := range s.Environments() {
		e := s.envs[k]
		rec := EnvRecord{Key: k, InstanceID: e.instID, Slot: e.slot, State: e.state, ParkedAt: e.parkedAt, Lost: e.lost}
		if e.inUse != nil {
			rec.ResumedBy = e.inUse.key
		}
		st.Envs = append(st.Envs, rec)
	}
	st.Pending = append([]time.Time(nil), s.pending...)
	if s.arr.learned() {
		st.Arrivals = s.arr.snapshot()
	}
	st.Learned = s.learned
	return st
}

// DeadJob is an acquisition whose job died with the previous process.
type DeadJob struct {
	Key        string
	InstanceID string
	// HoldsEnv is true when the job ran on a parked environment it resumed:
	// the environment outlives the job and is parked again with what the
	// job left (I6), so the instance must not be reset.
	HoldsEnv bool
}

// Restore builds a core from durable state after a restart. Every booking in
// st belonged to a job of the previous process and is gone: acquired slots
// are released (or their instances deleted, with DeleteOnDeadJob) and
// returned as dead jobs. Instances wait in a restored phase until the first
// Observe, which reconciles them with the provider's listing.
func Restore(cfg Config, st State, now time.Time) (*Scaler, []DeadJob, error) {
	s := New(cfg, now)
	names := map[string]phase{}
	for p := phase(0); p < numPhases; p++ {
		names[p.String()] = p
	}
	for _, rec := range st.Instances {
		p, ok := names[rec.Phase]
		if !ok {
			return nil, nil, fmt.Errorf("restore instance %s: unknown phase %q", rec.ID, rec.Phase)
		}
		if p == phaseRestored {
			p = phaseReady // restored twice without a listing: treat as it was before
		}
		in := s.addInstance(rec.ID, phaseRestored)
		in.restoredFrom = p
		in.useCount = rec.UseCount
		in.created = rec.Created
		in.deleteReason = rec.DeleteReason
		in.needsReset = rec.NeedsReset
	}
	// An instance that holds an environment is kept even with
	// DeleteOnDeadJob: the environment outlives the job that resumed it and
	// is parked again on reconcile (I6).
	holdsEnv := map[string]bool{}
	for _, rec := range st.Envs {
		if rec.Lost == "" {
			holdsEnv[rec.InstanceID] = true
		}
	}
	var dead []DeadJob
	for _, rec := range st.Reservations {
		in := s.instances[rec.InstanceID]
		if rec.Acquired && in != nil {
			dead = append(dead, DeadJob{Key: rec.Key, InstanceID: rec.InstanceID, HoldsEnv: holdsEnv[rec.InstanceID]})
			in.useCount++
			if cfg.DeleteOnDeadJob && in.restoredFrom != phaseDeleting && !holdsEnv[rec.InstanceID] {
				in.restoredFrom = phaseDeleting
				in.deleteReason = ReasonDeadJob
			}
		}
	}
	for _, rec := range st.Envs {
		e := &env{key: rec.Key, instID: rec.InstanceID, slot: rec.Slot, state: rec.State, parkedAt: rec.ParkedAt, lost: rec.Lost}
		if in := s.instances[rec.InstanceID]; in != nil && rec.Lost == "" {
			if rec.Slot < 0 || rec.Slot >= len(in.slots) {
				return nil, nil, fmt.Errorf("restore environment %s: slot %d out of range for capacity_per_instance=%d; restore the capacity the environment was parked with", rec.Key, rec.Slot, len(in.slots))
			}
			e.inst = in
			in.env = e
		} else if e.lost == "" {
			e.lost = fmt.Sprintf("instance %s was removed while berth was not running", rec.InstanceID)
		}
		s.envs[rec.Key] = e
	}
	for _, in := range s.instances {
		if s.cfg.MaxUseCount > 0 && in.useCount >= s.cfg.MaxUseCount && in.restoredFrom != phaseDeleting {
			in.restoredFrom = phaseDraining
			in.deleteReason = ReasonMaxUse
		}
		s.updateFree(in)
	}
	s.pending = append(s.pending, st.Pending...)
	s.restoredPending = len(s.pending)
	s.arr.load(st.Arrivals)
	s.loadLearned(st.Learned)
	s.dirty = true
	return s, dead, nil
}
