package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// The trace family: synthetic CI shapes nobody tuned a policy for, so that
// a policy is judged on more than the one week it was built on. Each shape
// is a function of a seed; the same seed gives the same trace.

// Shapes lists the shapes Generate makes; jitter is made by Jitter.
var Shapes = []string{"office", "monorepo", "nightly", "poisson",
	"weekend", "lowvolume", "teamchange", "growth", "twooffices", "release", "dst"}

// genStart is where generated traces begin: a Monday, 00:00 UTC.
var genStart = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// Generate makes weeks weeks of the named shape from seed:
//
//   - office: builds of 10–40 jobs every ~20 min (exponential gaps), 9–18 h
//     on weekdays; a build's jobs arrive within 30 s (its stages start).
//   - monorepo: pipelines of 50–200 jobs every ~10 min, around the clock,
//     jobs within 60 s.
//   - nightly: 500 jobs within 2 min at 02:00 every day, and a trickle of
//     one job every ~2 min from 8 to 20 h.
//   - poisson: one job every ~10 s, steady.
//   - weekend, lowvolume, teamchange, growth, twooffices, release, dst:
//     the shapes of traffic that changes (shapes.go).
//
// Durations are log-normal around a CI job's (median 4 min, most within
// 1–15 min), capped at 1 h.
func Generate(shape string, seed uint64, weeks int) ([]Job, error) {
	if weeks < 1 {
		return nil, fmt.Errorf("weeks %d: give 1 or more", weeks)
	}
	rng := rand.New(rand.NewPCG(seed, 0x6265727468))
	end := genStart.Add(time.Duration(weeks) * 7 * 24 * time.Hour)
	var jobs []Job
	switch shape {
	case "office":
		jobs = builds(rng, end, 20*time.Minute, 10, 40, 30*time.Second, officeHours)
	case "monorepo":
		jobs = builds(rng, end, 10*time.Minute, 50, 200, time.Minute, func(time.Time) bool { return true })
	case "nightly":
		jobs = nightly(rng, end)
	case "poisson":
		for t := genStart; t.Before(end); t = t.Add(expGap(rng, 10*time.Second)) {
			jobs = append(jobs, Job{Arrival: t, Duration: ciDuration(rng)})
		}
	default:
		if gen, ok := changingShapes[shape]; ok {
			jobs = gen(rng, end)
			break
		}
		return nil, fmt.Errorf("unknown shape %q; choose one of %v, or jitter", shape, Shapes)
	}
	sortJobs(jobs)
	return jobs, nil
}

func officeHours(t time.Time) bool {
	wd := t.Weekday()
	return wd != time.Saturday && wd != time.Sunday && t.Hour() >= 9 && t.Hour() < 18
}

// builds makes builds of lo..hi jobs with exponential gaps of mean gap
// while open(t), each job of a build arriving within spread of its start.
func builds(rng *rand.Rand, end time.Time, gap time.Duration, lo, hi int, spread time.Duration, open func(time.Time) bool) []Job {
	return buildsFrom(rng, genStart, end, gap, lo, hi, spread, open)
}

// buildsFrom is builds from start instead of genStart.
func buildsFrom(rng *rand.Rand, start, end time.Time, gap time.Duration, lo, hi int, spread time.Duration, open func(time.Time) bool) []Job {
	var jobs []Job
	for t := start; t.Before(end); t = t.Add(expGap(rng, gap)) {
		if !open(t) {
			continue
		}
		n := lo + rng.IntN(hi-lo+1)
		for range n {
			at := t.Add(time.Duration(rng.Int64N(int64(spread/time.Second)+1)) * time.Second)
			jobs = append(jobs, Job{Arrival: at, Duration: ciDuration(rng)})
		}
	}
	return jobs
}

func nightly(rng *rand.Rand, end time.Time) []Job {
	var jobs []Job
	for day := genStart; day.Before(end); day = day.Add(24 * time.Hour) {
		at := day.Add(2 * time.Hour)
		for range 500 {
			jobs = append(jobs, Job{Arrival: at.Add(time.Duration(rng.IntN(120)) * time.Second), Duration: ciDuration(rng)})
		}
		for t := day.Add(8 * time.Hour); t.Before(day.Add(20 * time.Hour)); t = t.Add(expGap(rng, 2*time.Minute)) {
			jobs = append(jobs, Job{Arrival: t, Duration: ciDuration(rng)})
		}
	}
	return jobs
}

// Jitter moves each job's arrival later by a random 0..max (whole seconds),
// as a converter that keeps per-job start times would see a trace whose
// builds were recorded as one instant.
func Jitter(jobs []Job, seed uint64, maxShift time.Duration) []Job {
	rng := rand.New(rand.NewPCG(seed, 0x6a6974746572))
	out := make([]Job, len(jobs))
	n := int64(maxShift/time.Second) + 1
	for i, j := range jobs {
		j.Arrival = j.Arrival.Add(time.Duration(rng.Int64N(n)) * time.Second)
		out[i] = j
	}
	sortJobs(out)
	return out
}

func sortJobs(jobs []Job) {
	sort.SliceStable(jobs, func(i, k int) bool { return jobs[i].Arrival.Before(jobs[k].Arrival) })
}

// expGap is an exponential gap of the given mean, in whole seconds (≥ 1).
func expGap(rng *rand.Rand, mean time.Duration) time.Duration {
	s := math.Round(rng.ExpFloat64() * mean.Seconds())
	return time.Duration(max(s, 1)) * time.Second
}

// ciDuration is a log-normal job duration: median 4 min, σ 0.8, 10 s to 1 h.
func ciDuration(rng *rand.Rand) time.Duration {
	s := 240 * math.Exp(0.8*rng.NormFloat64())
	s = min(max(math.Round(s), 10), 3600)
	return time.Duration(s) * time.Second
}
