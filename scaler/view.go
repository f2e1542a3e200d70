package scaler

import "time"

// InstanceView describes one instance for people and metrics.
type InstanceView struct {
	ID            string
	Phase         string
	ProviderState string
	// Slots by state: idle, reserved, acquired, suspended, unavailable.
	Slots        map[string]int
	UseCount     int
	Created      time.Time
	ReadyAt      time.Time
	Env          string
	DeleteReason Reason
	LastError    string
}

// Slot states, as docs/semantics.md names them.
const (
	SlotIdle        = "idle"
	SlotReserved    = "reserved"
	SlotAcquired    = "acquired"
	SlotSuspended   = "suspended"
	SlotUnavailable = "unavailable"
)

func (s *Scaler) view(in *instance) InstanceView {
	v := InstanceView{ID: in.id, Phase: in.phase.String(), ProviderState: string(in.provState),
		Slots: map[string]int{}, UseCount: in.useCount, Created: in.created, ReadyAt: in.readyAt,
		DeleteReason: in.deleteReason, LastError: in.lastErr}
	if in.env != nil {
		v.Env = in.env.key
	}
	for i, r := range in.slots {
		switch {
		case r != nil && r.acquired:
			v.Slots[SlotAcquired]++
		case r != nil:
			v.Slots[SlotReserved]++
		case in.env != nil && in.env.slot == i:
			v.Slots[SlotSuspended]++
		case in.phase == phaseReady:
			v.Slots[SlotIdle]++
		default:
			v.Slots[SlotUnavailable]++
		}
	}
	return v
}

// Instances describes every instance, sorted by ID.
func (s *Scaler) Instances() []InstanceView {
	out := make([]InstanceView, 0, len(s.instances))
	for _, in := range s.sortedInstances() {
		out = append(out, s.view(in))
	}
	return out
}

// Counts summarises the fleet for metrics.
type Counts struct {
	// InstancesByPhase counts instances by the core's phase names.
	InstancesByPhase map[string]int
	// Slots counts slots by slot state.
	Slots map[string]int
	// Pending counts instances requested but not yet listed.
	Pending int
	// Unbound counts bookings waiting for an instance.
	Unbound int
	// Refused counts refused reservations by reason since start.
	Refused map[string]int
	// Environments counts parked environments.
	Environments int
	// Granted counts reservations granted since start.
	Granted int
	// Polls counts poll bookings: long-polls in flight that hold capacity
	// but are no demand (poll.go).
	Polls int
}

// Counts returns the fleet summary. It is O(instances × capacity).
func (s *Scaler) Counts() Counts {
	c := Counts{InstancesByPhase: map[string]int{}, Slots: map[string]int{}, Pending: len(s.pending),
		Refused: map[string]int{}, Environments: len(s.envs), Granted: s.granted, Polls: len(s.polls)}
	for p := phase(0); p < numPhases; p++ {
		c.InstancesByPhase[p.String()] = s.byPhase[p]
	}
	for _, in := range s.instances {
		for k, n := range s.view(in).Slots {
			c.Slots[k] += n
		}
	}
	for _, r := range s.res {
		if r.inst == nil {
			c.Unbound++
		}
	}
	for k, n := range s.refused {
		c.Refused[k] = n
	}
	return c
}
