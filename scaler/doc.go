// Package scaler is berth's deterministic core: booking, scaling policy,
// instance lifecycle and restart reconciliation.
//
// It is a state machine in the style of etcd's raft package. Callers feed it
// events (a reservation, a provider listing, the result of a provider call, a
// clock tick) and carry out the actions that Ready returns. There is no I/O,
// no goroutine and no wall clock inside: the caller sets the time with
// Advance. One goroutine (or one lock) must own a Scaler; that single owner is
// what gives every decision one consistent snapshot (docs/failures.md, failure 2).
//
// # Usage
//
//	s := scaler.New(cfg, now)          // or scaler.Restore(cfg, state, now)
//	for event := range events {
//	s.Advance(clock.Now())
//	apply(s, event)             // Reserve, Observe, Tick, SuspendResult, ...
//	actions, dirty := s.Ready()
//	if dirty {
//		store.Save(s.State())   // persist BEFORE any provider call
//	}
//	for _, a := range actions {
//		carryOut(a)             // Increase, Decrease, Suspend, Resume, Bound, ...
//	}
//	}
//
// # The persist-before-provider-call rule
//
// Ready reports dirty when the durable state changed. The caller must save
// State before it carries out any provider action returned with it. The core
// records an intent (a pending Increase, a Decrease's reason, a parked
// environment) in the same decision that emits the action, so a berth that
// dies between the save and the call finds the intent in the store and
// finishes it on the next listing (see Restore and reconcile) instead of
// leaking an instance or losing an environment.
//
// # Invariants
//
// The scenario files (testdata/) and the seeded simulation (sim_test.go)
// check these after every command; comments in this package cite them.
//
//   - I1 no job is taken without a booked slot: Reserve succeeds only when a
//     slot is guaranteed, and Acquire binds exactly that booking.
//   - I2 no job fails because of capacity accounting, only because the
//     provider could not deliver, and then with that reason.
//   - I3 instances ≤ max_instances at every moment, counting requested but
//     unlisted instances, deleting ones and suspended ones.
//   - I4 no instance is leaked: after one reconcile every listed instance is
//     accounted for (known, adopted, or being deleted).
//   - I5 no scale-in of an instance holding a reserved, acquired or suspended
//     slot; candidates leave the free list before the Decrease.
//   - I6 a suspended environment survives any number of restarts and crashes
//     until it is resumed or expires.
//   - I7 provisioned capacity never exceeds demand + idle target + what rate
//     limits leave in flight; with the suspended tier, running plus pooled
//     instances never exceed that plus the tier's target.
//   - I8 every deletion has a recorded reason (Decrease.Reason, Gone.Reason).
//
// # Phases
//
// The core's phase of an instance is finer than the provider's state:
//
//	Increase ─▶ creating ─(running)─▶ booting ─(hook ok)─▶ ready
//	            creating ─(running, no ready hook)──────────▶ ready
//	ready ─(Suspend)─▶ suspend_wait ─(slots free)─▶ suspending ─▶ suspended
//	ready ─(idle past idle_time, tier on)─▶ suspending ─▶ suspended (pooled)
//	suspended ─(Resume)─▶ resuming ─(running)─▶ ready
//	ready ─(max_use_count, environment expired)─▶ draining ─(slots free)─▶ deleting
//	ready, suspended, creating, booting ─(idle, unclaimed, failure)─▶ deleting
//	deleting ─(gone from the listing)─▶ Gone
//	restored ─(first listing)─▶ any phase (reconcile)
//
// What each phase means:
//
//   - restored: loaded from the store; the first listing decides (reconcile).
//   - creating: requested and listed, or listed creating; counts as current.
//   - booting: the provider says running; instance_ready_command pending.
//   - ready: takes bookings; idle ones are scale-in candidates after idle_time.
//   - draining: takes no bookings; deleted when its last slot is free.
//   - deleting: a Decrease was issued and is retried until the instance is
//     gone from the listing; it still counts against max_instances (I3).
//   - suspend_wait: an environment is parked; other slots are finishing.
//   - suspending, suspended, resuming: the provider's suspend cycle; such
//     instances count only against max_instances. A suspending or
//     suspended instance with no environment that the core keeps as idle
//     capacity is "pooled" (the suspended tier, tier.go): it belongs to no
//     job, is resumed for demand before anything boots, and a booking binds
//     to it only once it is ready again.
//
// # Files
//
// scaler.go holds the type, its configuration and the Ready/Advance loop;
// instance.go the per-instance bookkeeping; booking.go Reserve, Acquire and
// Release; suspend.go environments; lifecycle.go the results of provider
// calls; observe.go listings; restore.go State, Restore and reconciliation;
// tick.go the periodic work; scaling.go the sizing decision; tier.go the
// suspended tier of idle capacity and queued demand; forecast.go the arrival
// model behind target_wait.
package scaler
