package queue

import "github.com/berth-ci/berth/api"

// WaitReason says why a queued job has not started yet, as the job loop
// that takes jobs sees it; it sets j.WaitingFor and j.WaitingDetail (see
// docs/semantics.md, "Why a queued job waits"). The queue itself cannot
// know: capacity is the manager's.
type WaitReason func(j *api.Job)

// WithWaitReason makes Get and List fill in why each queued job waits.
func WithWaitReason(f WaitReason) Option { return func(o *options) { o.waitReason = f } }

// explainWait fills in why j waits when j is queued.
func (q *Queue) explainWait(j *api.Job) {
	if j.State == api.JobQueued && q.waitReason != nil {
		q.waitReason(j)
	}
}
