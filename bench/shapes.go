package bench

import (
	"math"
	"math/rand/v2"
	"time"
)

// Shapes of traffic that changes or that no time-of-day profile predicts
// (issue 31): a policy that learns only "what happens at 10:15 on a
// weekday" misses all of them, so they judge the online part of the
// forecast and the floor from the target.
var changingShapes = map[string]func(*rand.Rand, time.Time) []Job{
	"weekend":    weekendBatches,
	"lowvolume":  lowVolume,
	"teamchange": teamChange,
	"growth":     growth,
	"twooffices": twoOffices,
	"release":    releaseDay,
	"dst":        dstWeek,
}

func weekend(t time.Time) bool {
	wd := t.Weekday()
	return wd == time.Saturday || wd == time.Sunday
}

// weekendBatches: on weekdays 3 jobs an hour at random; on Saturday and
// Sunday 5 batches a day at random hours, each of 150–400 jobs of ~30 min
// arriving within 60 s (a weekend job that fans out a test matrix).
func weekendBatches(rng *rand.Rand, end time.Time) []Job {
	var jobs []Job
	for t := genStart; t.Before(end); t = t.Add(expGap(rng, 20*time.Minute)) {
		if !weekend(t) {
			jobs = append(jobs, Job{Arrival: t, Duration: ciDuration(rng)})
		}
	}
	for day := genStart; day.Before(end); day = day.Add(24 * time.Hour) {
		if !weekend(day) {
			continue
		}
		for range 5 {
			at := day.Add(time.Duration(rng.Int64N(int64(24*time.Hour/time.Second))) * time.Second)
			n := 150 + rng.IntN(251)
			for range n {
				d := scaledDuration(rng, 30*time.Minute)
				jobs = append(jobs, Job{Arrival: at.Add(time.Duration(rng.IntN(61)) * time.Second), Duration: d})
			}
		}
	}
	return jobs
}

// lowVolume: 20 jobs a day at random times, every day.
func lowVolume(rng *rand.Rand, end time.Time) []Job {
	var jobs []Job
	for t := genStart.Add(expGap(rng, 72*time.Minute)); t.Before(end); t = t.Add(expGap(rng, 72*time.Minute)) {
		jobs = append(jobs, Job{Arrival: t, Duration: ciDuration(rng)})
	}
	return jobs
}

// teamChange: Monday is an office day (builds of 10–40 jobs every ~20 min,
// 9–18 h); from Tuesday another team works the weekdays from 14 to 23 h,
// with pipelines of 40–120 jobs every ~20 min and a 500-job burst at 14:00.
func teamChange(rng *rand.Rand, end time.Time) []Job {
	day2 := genStart.Add(24 * time.Hour)
	first := builds(rng, day2, 20*time.Minute, 10, 40, 30*time.Second, officeHours)
	late := func(t time.Time) bool {
		return !t.Before(day2) && !weekend(t) && t.Hour() >= 14 && t.Hour() < 23
	}
	jobs := append(first, builds(rng, end, 20*time.Minute, 40, 120, time.Minute, late)...)
	for day := day2; day.Before(end); day = day.Add(24 * time.Hour) {
		if weekend(day) {
			continue
		}
		at := day.Add(14 * time.Hour)
		for range 500 {
			jobs = append(jobs, Job{Arrival: at.Add(time.Duration(rng.IntN(120)) * time.Second), Duration: ciDuration(rng)})
		}
	}
	return jobs
}

// growth: a diurnal load that grows through the week: builds of 5–30 jobs
// from 8 to 20 h, every ~30 min on Monday down to every ~6 min on Sunday
// (weekends at half the rate), and one job every ~30 min at night.
func growth(rng *rand.Rand, end time.Time) []Job {
	var jobs []Job
	for t := genStart; t.Before(end); {
		days := t.Sub(genStart).Hours() / 24
		if t.Hour() < 8 || t.Hour() >= 20 {
			jobs = append(jobs, Job{Arrival: t, Duration: ciDuration(rng)})
			t = t.Add(expGap(rng, 30*time.Minute))
			continue
		}
		n := 5 + rng.IntN(26)
		for range n {
			jobs = append(jobs, Job{Arrival: t.Add(time.Duration(rng.IntN(31)) * time.Second), Duration: ciDuration(rng)})
		}
		gap := 30 * time.Minute / time.Duration(1+math.Floor(days*4/6))
		if weekend(t) {
			gap *= 2
		}
		t = t.Add(expGap(rng, gap))
	}
	return jobs
}

// twoOffices: two offices 8 h apart, each with office builds (10–40 jobs
// every ~20 min) on weekdays, one from 9 to 18 h UTC, the other from 17 to
// 02 h.
func twoOffices(rng *rand.Rand, end time.Time) []Job {
	east := builds(rng, end, 20*time.Minute, 10, 40, 30*time.Second, officeHours)
	west := builds(rng, end, 20*time.Minute, 10, 40, 30*time.Second, func(t time.Time) bool {
		return officeHours(t.Add(-8 * time.Hour))
	})
	return append(east, west...)
}

// releaseDay: office days, except Thursday, the release day: builds of
// 20–80 jobs every ~10 min from 9 to 18 h and 300 jobs within 2 min at
// 16:00 (the release pipeline).
func releaseDay(rng *rand.Rand, end time.Time) []Job {
	normal := func(t time.Time) bool { return t.Weekday() != time.Thursday && officeHours(t) }
	release := func(t time.Time) bool { return t.Weekday() == time.Thursday && officeHours(t) }
	jobs := builds(rng, end, 20*time.Minute, 10, 40, 30*time.Second, normal)
	jobs = append(jobs, builds(rng, end, 10*time.Minute, 20, 80, 30*time.Second, release)...)
	for day := genStart; day.Before(end); day = day.Add(24 * time.Hour) {
		if day.Weekday() != time.Thursday {
			continue
		}
		at := day.Add(16 * time.Hour)
		for range 300 {
			jobs = append(jobs, Job{Arrival: at.Add(time.Duration(rng.IntN(120)) * time.Second), Duration: ciDuration(rng)})
		}
	}
	return jobs
}

// DSTZone is the time zone of the dst shape's team, for --timezone.
const DSTZone = "America/New_York"

// dstChange is when New York's clocks went forward in 2026: Sunday 8 March,
// 2:00 EST.
var dstChange = time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)

// inNewYork is t on New York's clocks, by the 2026 rule (no time zone
// database needed to generate the trace).
func inNewYork(t time.Time) time.Time {
	if t.Before(dstChange) {
		return t.In(time.FixedZone("EST", -5*3600))
	}
	return t.In(time.FixedZone("EDT", -4*3600))
}

// dstWeek: office builds (10–40 jobs every ~20 min) on weekdays from 9 to
// 18 h in New York, from Thursday 5 March 2026, 00:00 EST. The clocks go
// forward on Sunday, so from Monday the team's hours come an hour earlier
// in UTC: a profile learned in UTC expects every morning an hour late.
// Unlike the other shapes it does not start on genStart (no change of
// clocks falls in January).
func dstWeek(rng *rand.Rand, end time.Time) []Job {
	start := time.Date(2026, 3, 5, 5, 0, 0, 0, time.UTC)
	return buildsFrom(rng, start, start.Add(end.Sub(genStart)), 20*time.Minute, 10, 40, 30*time.Second,
		func(t time.Time) bool { return officeHours(inNewYork(t)) })
}

// scaledDuration is ciDuration's log-normal around median m, capped at 3 m.
func scaledDuration(rng *rand.Rand, m time.Duration) time.Duration {
	s := m.Seconds() * math.Exp(0.8*rng.NormFloat64())
	s = min(max(math.Round(s), 10), 3*m.Seconds())
	return time.Duration(s) * time.Second
}
