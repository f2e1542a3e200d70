package scaler

// A burst at a set time, with a build on top.
//
// The profile holds, per slot, the largest need it saw there (an upper
// quantile with a fast rise), and pools the neighbours' needs into a slot
// within busy hours. A burst that comes at a set time inside busy hours (a
// team's 500 jobs at 14:00, between its pipelines every twenty minutes) is
// then sized for the burst alone: the day a pipeline starts within the
// burst's minute, the two together need more than either, and every job
// beyond the burst's pool waits a boot. On teamchange (seed 3, one day
// learned) that day was Thursday: 300 jobs within 50 s where the profile
// held 197, 279 jobs over 15 s.
//
// So where a slot's own need is a set-time burst, the forecast for the slot
// holds the burst plus the neighbours' largest build: the burst and one
// build of the busy hours at once. A slot is a set-time burst when its need
// is more than setBurstRatio times its neighbours' largest, it brought more
// than setBurstRateRatio times the arrivals of any of them, its need is the
// largest of its kind of day outside its neighbourhood (largestOfDay), and
// the neighbours show builds (minSetBurstBuild). A set-time burst in quiet
// hours (nightly's 02:00) has no builds around it and stays as it was.
//
// The thresholds were chosen on bench/table.sh (docs/bench.md, wave 12):
// with the need ratio alone at 1.5, two builds of an office day that met
// in one slot counted, and office, twooffices, monorepo, nightly, growth, release
// and dst lost 0.001-0.007 of utilization; teamchange's 14:00 slot needs
// 2.3-4.3 times its neighbours and brings 3.7-36 times their arrivals,
// while the office-like slots that passed 2.2 and 3.5 were lone builds in
// growth's sparse early hours, which are not the day's largest.

// setBurstRatio is how much larger than its neighbours' largest need a
// slot's own need must be to count as a burst at a set time: 2.2 times.
const setBurstRatio = 2.2

// minSetBurstBuild is the least need the neighbours must show to count as
// builds of busy hours: two jobs within the horizon. Below it the burst
// stands in quiet hours, and the profile's pool for it is all it needs.
const minSetBurstBuild = 2

// setBurstRateRatio is how many more arrivals than any neighbour a slot
// must see to stand as a burst at a set time: 3.5 times. A slot where
// two builds of an office day happened to meet needs more than its
// neighbours, but brings about twice their jobs, not many times.
const setBurstRateRatio = 3.5

// slotRate is week slot w's arrival rate: the weekday profile's blended
// with its kind of day's, as slotNeed blends the needs.
func (a *arrivals) slotRate(w int) float64 {
	d := a.priorDay(w)
	if a.m.DaySeen[d] == 0 {
		return 0
	}
	return a.blended(w, d, a.m.WeekRate, a.m.DayRate)
}

// largestOfDay reports whether week slot w's need, in the daily profile of
// its kind of day, is the largest of that day outside its neighbours: a
// burst at a set time is the day's peak. A build that stands alone in a
// quiet stretch of the busy hours (growth's Monday, a build every half
// hour) is larger than its neighbours but not the day's largest.
func (a *arrivals) largestOfDay(w int) bool {
	d := a.priorDay(w)
	base, i := d/slotsPerDay*slotsPerDay, d%slotsPerDay
	for j := range slotsPerDay {
		dist := min((j-i+slotsPerDay)%slotsPerDay, (i-j+slotsPerDay)%slotsPerDay)
		if dist > neighbourSlots && a.m.DayBurst[base+j] >= a.m.DayBurst[d] {
			return false
		}
	}
	return true
}
