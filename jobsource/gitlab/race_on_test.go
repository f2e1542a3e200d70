//go:build race

package gitlab

// raceEnabled: the race detector multiplies memory use, so a test of
// berth's own memory bound means nothing under it.
const raceEnabled = true
