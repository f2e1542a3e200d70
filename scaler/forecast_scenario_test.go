package scaler

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestForecastScenarios drives the arrival model alone through the files
// in testdata/forecast: arrivals and releases at given times, and what the
// model then forecasts. Times are "Mon-10:00[:05]" in the week of
// `monday`, plus week=N weeks.
//
//	horizons tier=45s hot=0s [keep=10m]  the horizons counted from now on (keep: the drawdown's)
//	arrive at=Mon-10:00 n=40 [spread=30s] [week=N] [steady=1]  (steady: a job ends as each arrives)
//	release at=Mon-10:04 n=40 [spread=30s] [week=N]
//	forecast at=Tue-09:58 [lead=2m] [week=N]
//	profile slot=Mon-10:00         the slot's weekday and daily profile, once it ended
//	waits n=100 [missed=5]         n jobs' waits steer the refill trust (missed of them past the target, first)
//	expect at=Tue-02:05 [within=10m] how many more jobs the profile expects (expectedJobs), if it can tell
//	drain at=Tue-10:20 [within=10m]  how deep the pool is drawn within the break-even time (drainDepth)
//	unlike at=Wed-11:00              the last hour's arrivals against the profile's (unlike.go)
func TestForecastScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/forecast", func(t *testing.T, path string) {
		a := newArrivals(nil)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := forecastCmd(a, d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

func forecastCmd(a *arrivals, d *datadriven.TestData) (string, error) {
	arg := func(k, def string) string {
		for _, x := range d.CmdArgs {
			if x.Key == k && len(x.Vals) > 0 {
				return strings.Join(x.Vals, " ")
			}
		}
		return def
	}
	dur := func(k, def string) (time.Duration, error) { return time.ParseDuration(arg(k, def)) }
	at, err := weekTime(arg("at", arg("slot", "Mon-00:00")), arg("week", "0"))
	if err != nil {
		return "", err
	}
	switch d.Cmd {
	case "horizons":
		tier, err := dur("tier", "45s")
		if err != nil {
			return "", err
		}
		hot, err := dur("hot", "0s")
		if err != nil {
			return "", err
		}
		keep, err := dur("keep", "10m")
		if err != nil {
			return "", err
		}
		a.setHorizons(tier, hot)
		a.drain.setHorizon(keep)
		if arg("keep", "") != "" {
			return fmt.Sprintf("tier %s hot %s keep %s\n", a.tierH, a.hotH, a.drain.h), nil
		}
		return fmt.Sprintf("tier %s hot %s\n", a.tierH, a.hotH), nil
	case "arrive", "release":
		var n int
		if _, err := fmt.Sscan(arg("n", "1"), &n); err != nil {
			return "", err
		}
		spread, err := dur("spread", "0s")
		if err != nil {
			return "", err
		}
		for i := range n {
			t := at.Add(spread * time.Duration(i) / time.Duration(max(n, 1)))
			if d.Cmd == "release" || arg("steady", "") != "" {
				a.release(t)
			}
			if d.Cmd == "arrive" {
				a.record(t, 1)
			}
		}
		return fmt.Sprintf("%s %d\n", d.Cmd, n), nil
	case "waits":
		var n, missed int
		if _, err := fmt.Sscan(arg("n", "1"), &n); err != nil {
			return "", err
		}
		if _, err := fmt.Sscan(arg("missed", "0"), &missed); err != nil {
			return "", err
		}
		for i := range n {
			a.steer(i < missed)
		}
		return fmt.Sprintf("trust %.3f: refill counts returns within %s (boot 1m, keep 10m)\n",
			math.Round(a.trust*1000)/1000+0, a.refillHorizon(time.Minute, 10*time.Minute)), nil
	case "expect":
		within, err := dur("within", "10m")
		if err != nil {
			return "", err
		}
		if n, ok := a.expectedJobs(at, within); ok {
			return fmt.Sprintf("%d more jobs expected within %s\n", n, within), nil
		}
		return "cannot tell\n", nil
	case "drain":
		within, err := dur("within", "10m")
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("pool drawn %d deep within %s\n", a.drainDepth(at, within), within), nil
	case "unlike":
		u := a.unlike(at)
		n, exp := 0, 0.0
		for i, c := range a.lastCounts {
			n, exp = n+c, exp+a.lastExpected[i]
		}
		if !u && slices.Contains(a.lastExpected[:], -1) {
			return fmt.Sprintf("like its profile: %d arrivals in the last hour, the profile never saw it\n", n), nil
		}
		verdict := "like"
		if u {
			verdict = "unlike"
		}
		return fmt.Sprintf("%s its profile: %d arrivals in the last hour, %.0f expected\n", verdict, n, exp), nil
	case "forecast":
		lead, err := dur("lead", "2m")
		if err != nil {
			return "", err
		}
		return a.forecast(at, lead).String() + "\n", nil
	case "profile":
		if arg("drain", "") != "" {
			a.roll(at.Truncate(profileSlot).Add(profileSlot))
			w := a.weekSlot(at)
			nd, src, _ := a.profiled(w)
			return fmt.Sprintf("week drain %.0f, day drain %.0f; pooled %.0f from %s\n",
				a.m.WeekDrain[w], a.m.DayDrain[daySlot(w)], nd.Drain, src), nil
		}
		a.roll(at.Truncate(profileSlot).Add(profileSlot)) // the slot has ended
		w := a.weekSlot(at)
		ds := daySlot(w)
		nd, src, ok := a.profiled(w)
		return fmt.Sprintf("week need %.0f (seen %d), day need %.0f (seen %d); pooled %.0f from %s (known %v)\n",
			a.m.WeekBurst[w], a.m.WeekSeen[w], a.m.DayBurst[ds], a.m.DaySeen[ds], nd.Tier, src, ok), nil
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

// weekTime reads "Mon-10:00" or "Mon-10:00:05" as a time in the given
// week after `monday`.
func weekTime(s, week string) (time.Time, error) {
	day, clock, ok := strings.Cut(s, "-")
	if !ok {
		return time.Time{}, fmt.Errorf("time %q: want \"Mon-10:00\"", s)
	}
	days := map[string]int{"Mon": 0, "Tue": 1, "Wed": 2, "Thu": 3, "Fri": 4, "Sat": 5, "Sun": 6}
	dn, ok := days[day]
	if !ok {
		return time.Time{}, fmt.Errorf("time %q: unknown day %q", s, day)
	}
	if strings.Count(clock, ":") == 1 {
		clock += ":00"
	}
	c, err := time.Parse("15:04:05", clock)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	var w int
	if _, err := fmt.Sscan(week, &w); err != nil {
		return time.Time{}, fmt.Errorf("week %q: %w", week, err)
	}
	return monday.AddDate(0, 0, 7*w+dn).Add(time.Duration(c.Hour())*time.Hour + time.Duration(c.Minute())*time.Minute + time.Duration(c.Second())*time.Second), nil
}
