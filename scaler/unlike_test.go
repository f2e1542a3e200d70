package scaler

import (
	"testing"
	"time"
)

// A day unlike its profile: an hour with more than twice the arrivals the
// profile expected of it, before it learned from them. The same hour on a
// day like the ones before is not; neither is a new install's first day,
// nor a few jobs at an hour learned quiet.
func TestUnlikeItsProfile(t *testing.T) {
	a := newArrivals()
	a.setHorizons(45*time.Second, 0)
	// hour replays n arrivals a slot from 10:00 to 11:00 on day d (from
	// monday) and asks at 11:00.
	hour := func(d, n int) bool {
		at := monday.AddDate(0, 0, d).Add(10 * time.Hour)
		for s := range unlikeSlots {
			for j := range n {
				a.record(at.Add(time.Duration(s)*profileSlot+time.Duration(j)*time.Second), 1)
			}
		}
		return a.unlike(at.Add(time.Hour))
	}
	if hour(0, 30) {
		t.Fatal("the first day, which the profile never saw, is unlike it")
	}
	if hour(1, 30) {
		t.Fatal("a day like the one before is unlike its profile")
	}
	if hour(2, 50) {
		t.Fatal("an hour with 5/3 of the arrivals expected is unlike its profile")
	}
	if !hour(3, 120) {
		t.Fatal("an hour with three times the arrivals expected is not unlike its profile")
	}
	// A few jobs at an hour learned quiet (every slot of Monday night was
	// folded in as empty) are not a day unlike it; a pipeline is.
	night := func(d, n int) bool {
		at := monday.AddDate(0, 0, d).Add(22 * time.Hour)
		for j := range n {
			a.record(at.Add(time.Duration(j)*time.Second), 1)
		}
		return a.unlike(at.Add(time.Hour))
	}
	if night(4, 5) {
		t.Fatal("5 jobs at an hour learned quiet are unlike its profile")
	}
	if !night(7, 40) {
		t.Fatal("40 jobs at an hour learned quiet are not unlike its profile")
	}
}
