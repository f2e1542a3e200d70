package main

import (
	"fmt"
	"os"

	"github.com/berth-ci/berth/bench"
)

// writeBenchHTML writes the replay's HTML report (bench --html) to path.
func writeBenchHTML(path string, samples []bench.Sample, res bench.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := bench.WriteHTML(f, samples, res); err != nil {
		f.Close()
		return fmt.Errorf("--html %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	return nil
}
