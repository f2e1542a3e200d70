package scaler

import "time"

// Action is something the caller must carry out for the core: a provider call
// or a notification to a waiting Acquire/Resume. Actions are returned by Ready
// in the order they were decided.
type Action interface{ isAction() }

// Increase asks the provider for N more instances.
type Increase struct{ N int }

// Decrease asks the provider to delete an instance. Reason is recorded for
// metrics and logs (invariant I8).
type Decrease struct {
	ID     string
	Reason Reason
}

// Suspend asks the provider to suspend an instance.
type Suspend struct{ ID string }

// Resume asks the provider to resume an instance.
type Resume struct{ ID string }

// RunReadyHook asks the caller to run instance_ready_command on an instance
// and report with HookResult. With Reset the instance was found running
// with no record of what ran there (Config.ResetAdopted): the caller resets
// it instead, and a failure deletes it (reason reset_failed).
type RunReadyHook struct {
	ID    string
	Reset bool
}

// Heartbeat asks the caller to check an instance and report with HeartbeatResult.
type Heartbeat struct{ ID string }

// Bound tells a waiting Acquire or Resume that its booking now has a slot on a
// ready instance. State is the saved state of a resumed environment.
type Bound struct {
	Key        string
	InstanceID string
	State      []byte
}

// Failed tells a waiting Acquire or Resume that its booking cannot be served.
type Failed struct {
	Key string
	Err error
}

// Lost tells the holder of an acquisition that its instance is gone. The
// acquisition no longer exists; Release of its key is a no-op.
type Lost struct {
	Key        string
	InstanceID string
	Reason     string
}

// Gone reports that an instance left the fleet for good: deleted by us (with
// the reason from its Decrease) or lost on the provider's side.
type Gone struct {
	ID     string
	Reason Reason
	// Lifetime is how long berth knew the instance.
	Lifetime time.Duration
}

// InstanceReady reports that an instance became ready to take jobs, After
// its first listing and SinceRequest after berth decided the Increase that
// made it (0 for an instance berth did not request: adopted, restored).
// The first listing comes when the provider already booted most of the
// instance, so After alone reads close to 0; SinceRequest is the wait a
// job sees.
type InstanceReady struct {
	ID           string
	After        time.Duration
	SinceRequest time.Duration
}

// Scaled reports a scaling decision with the numbers behind it, for logs.
// Have and Want count running (and soon running) instances, plus with the
// suspended tier the pooled ones and the tier's target.
type Scaled struct {
	Direction string // "up", "in", "resume" or "suspend"
	InUse     int
	IdleSlots int
	Have      int
	Want      int
	N         int
	// Suspended and SuspendedTarget are the tier's size and target.
	Suspended       int
	SuspendedTarget int
	// Tier marks a decision about the suspended tier.
	Tier bool
}

func (Increase) isAction()      {}
func (Decrease) isAction()      {}
func (Suspend) isAction()       {}
func (Resume) isAction()        {}
func (RunReadyHook) isAction()  {}
func (Heartbeat) isAction()     {}
func (Bound) isAction()         {}
func (Failed) isAction()        {}
func (Lost) isAction()          {}
func (Moved) isAction()         {}
func (Gone) isAction()          {}
func (Scaled) isAction()        {}
func (InstanceReady) isAction() {}

// Reason says why an instance was deleted or lost.
type Reason string

// Deletion reasons.
const (
	ReasonIdle              Reason = "idle_timeout"
	ReasonMaxUse            Reason = "max_use_count"
	ReasonHeartbeat         Reason = "heartbeat_failed"
	ReasonReadyHook         Reason = "ready_hook_failed"
	ReasonNotReady          Reason = "not_ready_in_time"
	ReasonProviderTimeout   Reason = "provider_timeout"
	ReasonEnvExpired        Reason = "environment_expired"
	ReasonUnclaimed         Reason = "unclaimed_suspended"
	ReasonUnknown           Reason = "unknown_instance"
	ReasonDeadJob           Reason = "job_died_with_berth"
	ReasonSuspendFailed     Reason = "suspend_failed"
	ReasonShutdown          Reason = "shutdown"
	ReasonRemovedByProvider Reason = "removed_by_provider"
	ReasonSuspendedIdle     Reason = "suspended_idle_timeout"
	ReasonResumeFailed      Reason = "resume_failed"
)

// Sized reports a target_wait sizing decision with the forecast behind it:
// how many hot idle slots and suspended idle instances the core keeps, and
// why. It is emitted when the sizes change, for one log line per decision.
type Sized struct {
	// Hot is idle slots kept ready; Suspended is idle instances kept suspended.
	Hot       int
	Suspended int
	// Rate (recent arrivals per second) and Burst (the jobs arriving within
	// the tier's horizon, boot − target, that the pools must serve) are the
	// forecast for the next two boot times; Source says where they come from.
	Rate   float64
	Burst  float64
	Source string
	// BootTime and ResumeTime are the measured (or assumed) times.
	BootTime   time.Duration
	ResumeTime time.Duration
	// TargetWait is the policy's target; Tier tells whether the suspended
	// tier can meet it (resume time within the target, cheaper than hot).
	TargetWait time.Duration
	Tier       bool
	// RefillTrust is how far the tier's refill counts on busy instances
	// coming back (the controller's state, −1 to 2, used clamped to 0..1),
	// and RefillHorizon the time within which returns count: a boot plus
	// the trusted share of Keep.
	RefillTrust   float64
	RefillHorizon time.Duration
	// Keep is the break-even time a surplus suspended instance is kept,
	// and Drain how deep the pool is drawn within it (the surplus kept
	// past it while RefillTrust is below 1).
	Keep  time.Duration
	Drain float64
	// KeepAll tells that no surplus goes at all for now: the last hour
	// was unlike the profile (more than twice its arrivals).
	KeepAll bool
}

func (Sized) isAction() {}
