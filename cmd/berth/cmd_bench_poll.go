package main

import (
	"github.com/spf13/pflag"

	"github.com/berth-ci/berth/bench"
)

// addBenchPollFlags adds the flags that model a polling job source (GitLab's
// long-polls) to `berth bench`; see bench/poll.go.
func addBenchPollFlags(f *pflag.FlagSet, cfg *bench.Config) {
	f.IntVar(&cfg.PollConcurrency, "poll-concurrency", 0,
		"berth: model a polling source (GitLab) with this many long-polls in flight, its request_concurrency (0: the built-in queue)")
	f.BoolVar(&cfg.PollsAsDemand, "polls-as-demand", false,
		"berth: book polls as jobs, as berth did before poll bookings, for comparison")
}
