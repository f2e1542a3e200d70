package gitlab

import (
	"context"
	"sync"
	"time"
)

// Settings are the settings of a source that a config reload may change
// while it runs ([[source]] keys of the same names). A job keeps the ones
// in force when GitLab handed it out, so a reload never changes a job
// midway: its builds dir, log limit, artifact limit and image stay.
type Settings struct {
	// RequestConcurrency bounds the job requests in flight.
	RequestConcurrency int
	// CheckInterval is the pause after an empty poll.
	CheckInterval time.Duration
	// BuildsDir, OutputLimit, MaxArtifactSize, DefaultImage and
	// RefuseShellJobs are as in Config.
	BuildsDir       string
	OutputLimit     int
	MaxArtifactSize int64
	DefaultImage    string
	RefuseShellJobs bool
}

// settingsOf returns the settings part of c, its defaults set.
func settingsOf(c Config) Settings {
	return Settings{RequestConcurrency: c.RequestConcurrency, CheckInterval: c.CheckInterval, BuildsDir: c.BuildsDir,
		OutputLimit: c.OutputLimit, MaxArtifactSize: c.MaxArtifactSize, DefaultImage: c.DefaultImage,
		RefuseShellJobs: c.RefuseShellJobs}
}

// withDefaults fills what the file left out as Config.withDefaults does.
func (st Settings) withDefaults() Settings {
	if st.RequestConcurrency <= 0 {
		st.RequestConcurrency = DefaultRequestConcurrency
	}
	setDuration(&st.CheckInterval, DefaultCheckInterval)
	if st.OutputLimit <= 0 {
		st.OutputLimit = DefaultOutputLimit
	}
	return st
}

// Settings returns the settings in force for the next job.
func (s *Source) Settings() Settings { return *s.set.Load() }

// SetSettings applies st from the next job request on; jobs already
// handed out keep theirs. A lower request_concurrency lets the polls in
// flight end: it bounds the ones that start.
func (s *Source) SetSettings(st Settings) {
	st = st.withDefaults()
	old := s.set.Swap(&st)
	s.polls.setLimit(st.RequestConcurrency)
	s.log.Info("gitlab source settings applied", "request_concurrency", st.RequestConcurrency,
		"check_interval", st.CheckInterval.String(), "builds_dir", st.BuildsDir, "output_limit", st.OutputLimit,
		"max_artifact_size", st.MaxArtifactSize, "image", st.DefaultImage, "refuse_shell_jobs", st.RefuseShellJobs,
		"was_request_concurrency", old.RequestConcurrency, "was_check_interval", old.CheckInterval.String())
}

// gate is a semaphore whose size can change: the polls in flight.
type gate struct {
	mu       sync.Mutex
	inflight int
	limit    int
	wake     chan struct{} // closed and replaced when a place may have freed
}

func newGate(limit int) *gate { return &gate{limit: limit, wake: make(chan struct{})} }

// acquire waits for a place or ctx's end.
func (g *gate) acquire(ctx context.Context) error {
	for {
		g.mu.Lock()
		if g.inflight < g.limit {
			g.inflight++
			g.mu.Unlock()
			return nil
		}
		wake := g.wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (g *gate) release() {
	g.mu.Lock()
	g.inflight--
	g.wakeLocked()
	g.mu.Unlock()
}

func (g *gate) setLimit(n int) {
	g.mu.Lock()
	g.limit = n
	g.wakeLocked()
	g.mu.Unlock()
}

func (g *gate) wakeLocked() {
	close(g.wake)
	g.wake = make(chan struct{})
}
