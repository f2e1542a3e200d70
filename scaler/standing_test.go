package scaler

import "testing"

// Bursts at scattered hours of a kind of day hold their largest need all
// day on it; one busy block (an office day, one across midnight, a nightly
// burst with a daytime trickle) holds nothing.
func TestStandingNeedFromEpisodes(t *testing.T) {
	day := func(kind int, slots map[int]float64) *arrivals {
		a := newArrivals(nil)
		for i := range dayKinds * slotsPerDay {
			a.m.DaySeen[i] = 1
		}
		for s, n := range slots {
			a.m.DayRate[kind*slotsPerDay+s] = n / profileSlot.Seconds()
			a.m.DayBurst[kind*slotsPerDay+s] = n
		}
		return a
	}
	saturday := newArrivals(nil).weekSlot(monday.AddDate(0, 0, 5))
	tuesday := newArrivals(nil).weekSlot(monday.AddDate(0, 0, 1))
	weekend := day(1, map[int]float64{10: 200, 40: 300, 80: 150})
	if nd, ok := weekend.standing(saturday); !ok || nd.Tier != 300 {
		t.Fatalf("three batches hours apart: standing %v %v, want 300", nd, ok)
	}
	if _, ok := weekend.standing(tuesday); ok {
		t.Fatal("a weekday holds the weekend's standing need")
	}
	// The weekend shape's seeds 1 and 3: two batches an hour or half an
	// hour apart are two bursts of the pattern; the third finds a pool.
	if nd, ok := day(1, map[int]float64{8: 200, 12: 190}).standing(saturday); !ok || nd.Tier != 200 {
		t.Fatalf("two batches an hour apart: standing %v %v, want 200", nd, ok)
	}
	if nd, ok := day(1, map[int]float64{8: 200, 9: 190}).standing(saturday); ok {
		t.Fatalf("one batch across two slots holds a standing need %v", nd)
	}
	if nd, ok := day(1, map[int]float64{8: 200, 10: 40}).standing(saturday); ok {
		t.Fatalf("a batch and a small build hold a standing need %v", nd)
	}
	office := map[int]float64{}
	for s := 36; s < 72; s += 3 { // a build every 45 minutes, 9-18 h
		office[s] = 40
	}
	if nd, ok := day(0, office).standing(tuesday); ok {
		t.Fatalf("an office day holds a standing need %v", nd)
	}
	late := map[int]float64{}
	for s := 68; s < 104; s += 2 { // 17-02 h
		late[s%slotsPerDay] = 40
	}
	if nd, ok := day(0, late).standing(tuesday); ok {
		t.Fatalf("an office day across midnight holds a standing need %v", nd)
	}
	nightly := map[int]float64{8: 190}
	for s := 32; s < 80; s++ {
		nightly[s] = 2
	}
	if nd, ok := day(0, nightly).standing(tuesday); ok {
		t.Fatalf("a nightly burst and a trickle hold a standing need %v", nd)
	}
}
