package scaler

import (
	"errors"
	"fmt"
)

// ErrNoCapacity is returned by Reserve when no slot can be guaranteed. The
// caller must not take a job. Use errors.As with *NoCapacityError for details.
var ErrNoCapacity = errors.New("no capacity")

// NoCapacityError explains a refused reservation.
type NoCapacityError struct {
	// Reason is "max_instances" when the fleet is at max_instances (in
	// preemptive mode too), else "no_idle_slot" (preemptive mode: no idle
	// slot on a ready instance yet).
	Reason string
	// Detail has the numbers behind the refusal.
	Detail string
}

func (e *NoCapacityError) Error() string {
	return fmt.Sprintf("no capacity (%s): %s", e.Reason, e.Detail)
}

// Unwrap makes errors.Is(err, ErrNoCapacity) true.
func (e *NoCapacityError) Unwrap() error { return ErrNoCapacity }

// ErrUnknownKey is returned for a key that holds no reservation.
var ErrUnknownKey = errors.New("no reservation with this key")

// ErrMoved is returned by Connected when the booking no longer sits on the
// instance the caller fetched connection details for: that instance went,
// and the booking moved to another slot (a Moved action said so).
var ErrMoved = errors.New("the booking moved to another instance")

// ErrDuplicateKey is returned by Reserve for a key that is already booked.
var ErrDuplicateKey = errors.New("key already holds a reservation")

// ErrNotAcquired is returned by Suspend when the key's reservation has no running job.
var ErrNotAcquired = errors.New("reservation is not acquired")

// ErrSuspendUnsupported is returned by Suspend when the provider cannot suspend instances.
var ErrSuspendUnsupported = errors.New("the provider cannot suspend instances; use a provider with the suspend capability (local, sim)")

// ErrUnknownEnv is returned by Resume for a key that names no environment.
var ErrUnknownEnv = errors.New("no suspended environment with this key: it expired (environment_ttl), was used by a job that did not park it again, or never existed; submit without --resume to start fresh")

// EnvLostError is returned by Resume when the environment's instance is gone.
type EnvLostError struct {
	Key        string
	InstanceID string
	Reason     string
}

func (e *EnvLostError) Error() string {
	return fmt.Sprintf("environment %s cannot be resumed: its instance %s is gone (%s); submit the job without --resume to start fresh", e.Key, e.InstanceID, e.Reason)
}

// ErrEnvBusy is returned by Resume when another job already resumed the environment.
var ErrEnvBusy = errors.New("environment is already resumed by another job")

// InstanceLostError is delivered to a waiting Acquire when the instance that
// was booting for it is gone and no replacement is ready.
type InstanceLostError struct {
	InstanceID string
	Reason     string
}

func (e *InstanceLostError) Error() string {
	return fmt.Sprintf("instance %s was lost: %s", e.InstanceID, e.Reason)
}

// ErrEnvSlotTaken is returned by Suspend when the acquisition's instance
// already holds another parked environment: an instance is suspended whole,
// so it can carry only one. Release the job instead.
var ErrEnvSlotTaken = errors.New("the instance already holds another suspended environment; release the job instead")
