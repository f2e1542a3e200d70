package sim

// This file holds small read-only helpers for `berth bench`, which samples
// the group after every event of a week-long replay. Stats also totals the
// bill, which walks every live instance; these helpers stay O(1) so that a
// sample per event does not dominate the replay.

// Live returns the number of instances not yet gone at the current clock:
// listed or still hidden by ListingLag, in any state including deleting.
// It is what counts against a max_instances limit in the real cloud.
func (g *Group) Live() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tick()
	return g.live
}

// Counters returns Stats at the current clock without BilledSeconds (left
// zero), which is the one part of Stats whose cost grows with the fleet.
func (g *Group) Counters() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tick()
	s := g.st
	s.Live = g.live
	return s
}
