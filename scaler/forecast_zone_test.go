package scaler

import (
	"testing"
	"time"
)

// A team in New York builds at 10:00 on Thursday and Friday; the clocks go
// forward on Sunday 8 March 2026, so on Monday its 10:00 is an hour earlier
// in UTC. A profile counted in the team's zone forecasts Monday's build at
// its new UTC hour; one counted in UTC expects it an hour late and holds
// nothing when it comes.
func TestProfileInPolicyZoneSurvivesDaylightSaving(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	learn := func(zone *time.Location) *arrivals {
		a := newArrivals(zone)
		a.setHorizons(time.Minute, 0)
		for _, day := range []int{5, 6} { // Thursday and Friday, EST (UTC-5)
			at := time.Date(2026, 3, day, 10, 0, 0, 0, ny)
			a.record(at, 40)
			a.roll(at.Add(time.Hour))
		}
		return a
	}
	monday := time.Date(2026, 3, 9, 9, 58, 0, 0, ny) // EDT (UTC-4): 13:58 UTC
	if f := learn(ny).forecast(monday, 2*time.Minute); f.Burst < 38 {
		t.Errorf("profile in New York time, Monday 09:58 EDT: forecast %+v; want the 40-job build of 10:00", f)
	}
	if f := learn(nil).forecast(monday, 2*time.Minute); f.Burst != 0 {
		t.Errorf("profile in UTC, Monday 13:58 UTC: forecast %+v; want nothing (it learned 15:00 UTC)", f)
	}
}

// A persisted model keeps its zone; a model of another zone, or one saved
// before zones (UTC), is relearned rather than read an offset away.
func TestArrivalModelOfAnotherZoneIsRelearned(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	a := newArrivals(berlin)
	a.setHorizons(time.Minute, 0)
	a.record(monday.Add(10*time.Hour), 40)
	a.roll(monday.Add(11 * time.Hour))
	m := a.snapshot()
	if m.Zone != "CET" {
		t.Fatalf("snapshot zone %q; want CET", m.Zone)
	}
	loads := func(zone *time.Location, m *ArrivalModel) bool {
		b := newArrivals(zone)
		b.load(m)
		return b.learned()
	}
	if !loads(berlin, m) {
		t.Error("a model of the same zone was not loaded")
	}
	if loads(nil, m) {
		t.Error("a CET model was loaded into a UTC profile")
	}
	u := newArrivals(nil)
	u.setHorizons(time.Minute, 0)
	u.record(monday.Add(10*time.Hour), 40)
	u.roll(monday.Add(11 * time.Hour))
	if m := u.snapshot(); m.Zone != "" {
		t.Errorf("UTC snapshot zone %q; want empty, as before zones", m.Zone)
	}
	if loads(berlin, u.snapshot()) {
		t.Error("a UTC model was loaded into a CET profile")
	}
}
