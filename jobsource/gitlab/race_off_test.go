//go:build !race

package gitlab

const raceEnabled = false
