package bench

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/berth-ci/berth/scaler"
)

// A polling source: GitLab's runner API. With Config.PollConcurrency N the
// berth policy takes jobs as the manager takes them from GitLab: N job loops
// each hold a poll booking (scaler.ReservePoll) while their long-poll is in
// flight, and a job leaves the queue only into a poll, whose booking then
// becomes the job's (Promote). The source cannot say how many jobs wait, so
// the core hears of none before a poll returns one (no Queued). Empty
// long-polls that end and are booked again at once change nothing in the
// core (a poll decides nothing), so they are not replayed one by one.
//
// With Config.PollsAsDemand a poll books as a job does (Reserve), as berth
// did before poll bookings (issue 17): the figures of that behaviour, for
// comparison.

// pollState is the polling job loops of a coreDriver.
type pollState struct {
	keys []string       // poll bookings in flight, oldest first
	job  map[string]int // booking key → job, for keys that are not job numbers
	seq  int
}

// pollStep books polls for idle job loops and hands queued jobs to polls in
// flight, oldest poll first.
func (d *coreDriver) pollStep() error {
	r, s, p := d.r, d.s, &d.poll
	for len(p.keys) < r.cfg.PollConcurrency {
		p.seq++
		k := "poll-" + strconv.Itoa(p.seq)
		var err error
		if r.cfg.PollsAsDemand {
			err = s.Reserve(k)
		} else {
			err = s.ReservePoll(k)
		}
		if errors.Is(err, scaler.ErrNoCapacity) {
			break
		}
		if err != nil {
			return fmt.Errorf("reserve poll %s: %w", k, err)
		}
		p.keys = append(p.keys, k)
	}
	for r.queue.len() > 0 && len(p.keys) > 0 {
		k := p.keys[0]
		p.keys = p.keys[1:]
		j := r.queue.pop()
		if !r.cfg.PollsAsDemand {
			if err := s.Promote(k); err != nil {
				return fmt.Errorf("promote poll %s for job %d: %w", k, j, err)
			}
		}
		if p.job == nil {
			p.job = map[string]int{}
		}
		p.job[k] = j
		d.keys[j] = k
		if err := d.acquire(j); err != nil {
			return err
		}
	}
	return nil
}

// jobOf maps a booking key back to its job.
func (d *coreDriver) jobOf(key string) (int, bool) {
	if j, ok := d.poll.job[key]; ok {
		return j, true
	}
	j, err := strconv.Atoi(key)
	if err != nil || j < 0 || j >= len(d.r.jobs) {
		return 0, false
	}
	return j, true
}

func (c *Config) validatePolls() error {
	switch {
	case c.PollConcurrency < 0:
		return fmt.Errorf("poll concurrency %d is negative; give the source's request_concurrency (0: the built-in queue)", c.PollConcurrency)
	case c.PollConcurrency > 0 && c.Policy != PolicyBerth:
		return fmt.Errorf("poll concurrency models how berth books GitLab's long-polls; it needs --policy %s, not %s", PolicyBerth, c.Policy)
	case c.PollConcurrency > 0 && c.Preemptive && c.IdleCount == 0:
		// As berth's config check: a polling source cannot report queued
		// jobs, so in preemptive mode nothing would ever start an instance.
		return errors.New("a polling source in preemptive mode needs an idle count of 1 or more, or on-demand mode: no instance would ever start")
	case c.PollsAsDemand && c.PollConcurrency == 0:
		return errors.New("polls as demand needs a poll concurrency of 1 or more")
	}
	return nil
}
