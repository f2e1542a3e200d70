package manager

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/scaler"
)

// waitState is why the built-in queue's job loop last did not take a job:
// the reason every queued job waits for (api.Job.WaitingFor), set by the
// loop, read by the API. Jobs leave the queue in order, so the head's
// reason holds for every job behind it; a job that resumes a parked
// environment needs no capacity and has its own (explainWait).
type waitState struct {
	mu     sync.Mutex
	reason string
	detail string
}

// set records why the loop took no job; a change is logged once, with
// the numbers behind it.
func (w *waitState) set(log *slog.Logger, reason, detail string) {
	w.mu.Lock()
	changed := w.reason != reason
	w.reason, w.detail = reason, detail
	w.mu.Unlock()
	if changed && reason != api.WaitTurn {
		log.Info("queued jobs wait", "waiting_for", reason, "detail", detail)
	}
}

func (w *waitState) get() (string, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason, w.detail
}

// refused records a refused booking: the scaler's reason
// (max_instances, no_idle_slot) and its numbers.
func (w *waitState) refused(log *slog.Logger, err error) {
	var nc *scaler.NoCapacityError
	if !errors.As(err, &nc) {
		return
	}
	detail := nc.Detail
	switch nc.Reason {
	case api.WaitMaxInstances:
		detail = "every slot is in use and the fleet is at max_instances; the job starts when a running job ends (raise autoscaler.max_instances to run more at once): " + detail
	case api.WaitNoIdleSlot:
		detail = "preemptive mode takes a job only onto an idle slot of a ready instance; an instance is starting for it: " + detail
	}
	w.set(log, nc.Reason, detail)
}

// took records that the loop took a job: the jobs still queued wait their
// turn.
func (w *waitState) took(log *slog.Logger) {
	w.set(log, api.WaitTurn, "berth is taking queued jobs, oldest first")
}

// explainWait is the queue's WaitReason: why queued job j has not started.
func (m *Manager) explainWait(j *api.Job) {
	if j.Resume != "" {
		f := m.live.Load()
		if f != nil && f.EnvBusy(j.Resume) {
			j.WaitingFor = api.WaitResume
			j.WaitingDetail = fmt.Sprintf("environment %s is in use by another job (or being resumed for one); this job starts when that job is done with it", j.Resume)
			return
		}
		j.WaitingFor, j.WaitingDetail = api.WaitTurn, fmt.Sprintf("environment %s is free; the job starts next (a resume needs no new capacity)", j.Resume)
		return
	}
	reason, detail := m.waiting.get()
	if reason == "" {
		reason, detail = api.WaitTurn, "berth takes queued jobs in order"
	}
	if f := m.live.Load(); f != nil && reason != api.WaitLeadership {
		// Whatever the loop last saw, the instances the jobs wait for
		// cannot be created: say so, with the provider's words.
		if e := f.IncreaseError(); e != "" {
			reason, detail = increaseWait(e)
		}
	}
	j.WaitingFor, j.WaitingDetail = reason, detail
}

// throttleWords are the words of the AWS and Azure plugins' ErrThrottled
// ("API request rate exceeded"). An error crosses the plugin boundary as
// text, with only ErrTransient and ErrInstanceGoing kept as kinds, so its
// words tell a throttle apart. GCP's ErrThrottled also stands for an
// operation's QUOTA_EXCEEDED, a capacity refusal, so it stays "capacity".
var throttleWords = []string{"API request rate exceeded"}

// increaseWait is the reason and detail of a failed Increase. A throttle
// is not a lack of capacity: nothing was refused but the call itself, and
// the provider's words say until when (Azure's Retry-After).
func increaseWait(e string) (string, string) {
	for _, w := range throttleWords {
		if strings.Contains(e, w) {
			return api.WaitThrottled, "the cloud's API is throttling berth's calls, so no instance can be asked for until it allows them again; berth asks then: " + e
		}
	}
	return api.WaitCapacity, "the provider could not create instances; berth keeps asking: " + e
}
