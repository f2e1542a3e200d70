package queue

import (
	"context"
	"time"
)

// AppliedAroundCommit makes one write transaction on an etcd queue (a job
// ID taken, a record put, an index entry deleted) and reports what
// applied says of it before and after its commit: what the queue checks
// when a commit's reply is lost.
func AppliedAroundCommit(q *Queue) (before, after bool, err error) {
	b := q.st.(*etcdBackend)
	t := newEtcdTx(context.Background(), b, true)
	n, err := t.nextSequence()
	if err != nil {
		return false, false, err
	}
	if err := t.put(bucketJobs, seqKey(n), []byte(`{"id":"x"}`)); err != nil {
		return false, false, err
	}
	if err := t.del(bucketQueued, seqKey(n)); err != nil {
		return false, false, err
	}
	if before, err = t.applied(); err != nil {
		return false, false, err
	}
	if err := t.commit(nil); err != nil {
		return before, false, err
	}
	after, err = t.applied()
	return before, after, err
}

// Probing says whether a health probe is in flight.
func Probing(q *Queue) bool {
	q.health.mu.Lock()
	defer q.health.mu.Unlock()
	return q.health.probing
}

// ProbeNow makes the next Health probe the store.
func ProbeNow(q *Queue) {
	q.health.mu.Lock()
	defer q.health.mu.Unlock()
	q.health.probedAt = time.Time{}
}
