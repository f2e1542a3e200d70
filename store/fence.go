package store

import "errors"

// ErrFenced means this manager no longer leads: a coordination store
// refused its write because another manager took over, or its term ended.
// Errors of a fenced backend (package ha) match it with errors.Is, so that
// the fleet and the manager can branch on it without importing the backend.
// The caller must stop acting on the fleet at once: its in-memory state is
// stale, and every provider call it still made could undo the new leader's.
var ErrFenced = errors.New("this manager no longer leads; its writes are refused")

// Leader is a Store whose writes are fenced by a leadership. The fleet asks
// it right before every provider call whether this manager still leads: a
// save proves leadership when it commits, but the provider call that
// follows it may come much later (a GC pause, SIGSTOP, a stalled machine).
type Leader interface {
	// Leading returns nil while this manager leads. Once it does not, it
	// returns an error matching ErrFenced; any other error means it could
	// not tell (the coordination store is unreachable), and the caller must
	// not act either but may try again.
	Leading() error
}
