//go:build race

package manager

// raceEnabled: the race detector instruments every function, so frame
// sizes (and what a goroutine's stack can shrink to) are not a release's.
const raceEnabled = true
