//go:build linux

package local

import "time"

// SpawnerPID returns the PID of p's running sandbox spawner, 0 when none.
func SpawnerPID(p *Provider) int { return p.spawnerPID() }

// SetSpawnerTimeout sets how long berth waits for the spawner's answer,
// until the returned restore is called.
func SetSpawnerTimeout(d time.Duration) (restore func()) {
	prev := spawnerTimeout
	spawnerTimeout = d
	return func() { spawnerTimeout = prev }
}

// SetSpawnerFailureWindow sets how long a spawner failure counts, until
// the returned restore is called.
func SetSpawnerFailureWindow(d time.Duration) (restore func()) {
	prev := spawnerFailureWindow
	spawnerFailureWindow = d
	return func() { spawnerFailureWindow = prev }
}
