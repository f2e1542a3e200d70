package queue

import (
	"errors"
	"fmt"
)

// Fence says what a leader's write must prove under HA: the leader's
// election key still exists with the creation revision it won with
// (ha.Term.Fence gives both). ok is false while this manager does not lead
// (a standby, or a term that ended): its leader writes then fail with
// ErrNotLeader without asking etcd. It is called at every leader write, so
// one Fence serves every term of a manager.
type Fence func() (leaderKey string, rev int64, ok bool)

// Errors of the etcd queue callers branch on with errors.Is.
var (
	// ErrNotLeader: a write only the leader may make (take, start or
	// finish a job) was asked of a manager that does not lead.
	ErrNotLeader = errors.New("this manager is not the leader: only the leader takes, starts and finishes jobs")
	// ErrFenced: etcd refused a leader write because the leader's
	// election key is gone: another manager leads now. Nothing was
	// changed; the caller must stop running jobs from this queue.
	ErrFenced = errors.New("write refused by etcd: this manager lost its leadership (its election key is gone), another manager leads now")
)

// FailoverReason is the reason recorded for jobs a previous leader was
// running when a new leader took the queue over (see TakeOver): that
// manager lost its leadership, so it can no longer record their results.
const FailoverReason = "the berth manager running the job lost its leadership (failover) before the job ended"

// CorruptError is a value in etcd the queue cannot use. It names the key,
// so that an operator can look at it and delete it.
type CorruptError struct {
	// Key is the full etcd key.
	Key string
	// Value is the value as stored.
	Value []byte
	// Err says what is wrong with it.
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("etcd key %q holds a value the queue cannot use: %v; fix or delete the key (etcdctl get/del %q)", e.Key, e.Err, e.Key)
}

func (e *CorruptError) Unwrap() error { return e.Err }
