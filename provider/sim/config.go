package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Config describes how the simulated cloud behaves. The zero value is a
// perfect cloud: instances exist and run the moment Increase returns, never
// fail, and have no quota. Every field is independent, so a test can turn on
// exactly the misbehaviour it is about.
type Config struct {
	// BootTime is how long an instance stays creating before it is running.
	BootTime time.Duration
	// BootJitter adds a uniformly random 0..BootJitter (inclusive) to each
	// instance's boot time, so instances asked for together do not all
	// become ready at the same instant.
	BootJitter time.Duration
	// ListingLag is how long after Increase an instance first appears in
	// Update, like clouds whose list API is eventually consistent. The
	// instance exists (and boots, and is billed) during the lag; it is only
	// invisible. It is listed in whatever state it has reached by then,
	// which is creating as long as ListingLag < BootTime.
	ListingLag time.Duration
	// IncreaseFailRate is the probability, 0..1, that an Increase call
	// fails: it then creates a random number of instances fewer than it
	// could (possibly none) and returns that count with an error wrapping
	// ErrIncreaseFailed.
	IncreaseFailRate float64
	// NeverReadyRate is the probability, 0..1, that a new instance stays
	// creating for ever, so the scaler's boot timeout has to notice it.
	NeverReadyRate float64
	// MeanTimeToFailure, when positive, makes every instance die on its
	// own after an exponentially distributed time with this mean, counted
	// from its Increase. A dead instance is gone, like one removed by Kill.
	MeanTimeToFailure time.Duration
	// Quota is the most instances the cloud holds at once (instances being
	// deleted still count until they are gone); 0 means no quota. Increase
	// beyond it creates what fits and returns an error wrapping ErrQuota.
	// The quota is not advertised in Info.MaxSize, because real clouds
	// reveal quotas by refusing requests, and that is the path to exercise.
	Quota int
	// SuspendLatency is how long an instance stays suspending.
	SuspendLatency time.Duration
	// ResumeLatency is how long an instance stays resuming.
	ResumeLatency time.Duration
	// DeleteLatency is how long an instance stays deleting before it is
	// gone and billing stops.
	DeleteLatency time.Duration
	// Seed seeds the PCG generator behind every random choice, so a run is
	// reproducible from its configuration and its sequence of calls.
	Seed uint64
	// SupportsSuspend advertises the suspend capability in Info; without it
	// Suspend and Resume fail with ErrUnsupported.
	SupportsSuspend bool
	// ReportDeleted makes Update list an instance that has just gone
	// (deleted after Decrease, killed or failed) once as deleted before it
	// disappears from listings; without it a gone instance is simply no
	// longer listed. Both are behaviours real providers show.
	ReportDeleted bool
}

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	durs := []struct {
		name string
		d    time.Duration
	}{
		{"boot_time", c.BootTime}, {"boot_jitter", c.BootJitter},
		{"listing_lag", c.ListingLag}, {"mean_time_to_failure", c.MeanTimeToFailure},
		{"suspend_latency", c.SuspendLatency}, {"resume_latency", c.ResumeLatency},
		{"delete_latency", c.DeleteLatency},
	}
	for _, d := range durs {
		if d.d < 0 {
			return fmt.Errorf("sim: %s is %v; it must not be negative", d.name, d.d)
		}
	}
	rates := []struct {
		name string
		r    float64
	}{{"increase_fail_rate", c.IncreaseFailRate}, {"never_ready_rate", c.NeverReadyRate}}
	for _, r := range rates {
		// The negated form also rejects NaN.
		if !(r.r >= 0 && r.r <= 1) {
			return fmt.Errorf("sim: %s is %v; it must be a probability between 0 and 1", r.name, r.r)
		}
	}
	if c.Quota < 0 {
		return fmt.Errorf("sim: quota is %d; use 0 for no quota", c.Quota)
	}
	return nil
}

// jsonDuration accepts "90s"-style strings (what users write in TOML) and
// plain numbers of seconds.
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want a Go duration such as \"90s\" or \"2m30s\"", s)
		}
		*d = jsonDuration(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"90s\" or a number of seconds", b)
	}
	*d = jsonDuration(f * float64(time.Second))
	return nil
}

// jsonConfig is the provider_config wire form. Pointers let a decode
// overlay only the fields present.
type jsonConfig struct {
	BootTime          *jsonDuration `json:"boot_time"`
	BootJitter        *jsonDuration `json:"boot_jitter"`
	ListingLag        *jsonDuration `json:"listing_lag"`
	IncreaseFailRate  *float64      `json:"increase_fail_rate"`
	NeverReadyRate    *float64      `json:"never_ready_rate"`
	MeanTimeToFailure *jsonDuration `json:"mean_time_to_failure"`
	Quota             *int          `json:"quota"`
	SuspendLatency    *jsonDuration `json:"suspend_latency"`
	ResumeLatency     *jsonDuration `json:"resume_latency"`
	DeleteLatency     *jsonDuration `json:"delete_latency"`
	Seed              *uint64       `json:"seed"`
	SupportsSuspend   *bool         `json:"supports_suspend"`
	ReportDeleted     *bool         `json:"report_deleted"`
}

// UnmarshalJSON decodes the provider_config form of a Config: snake_case
// keys, durations as strings like "60s" (or numbers of seconds). Keys that
// are absent leave the field as it was; unknown keys are an error, so a typo
// in berth's config does not silently give a perfect cloud.
func (c *Config) UnmarshalJSON(b []byte) error {
	var j jsonConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("sim: provider_config: %w (known keys: boot_time, boot_jitter, listing_lag, increase_fail_rate, never_ready_rate, mean_time_to_failure, quota, suspend_latency, resume_latency, delete_latency, seed, supports_suspend, report_deleted)", err)
	}
	if dec.More() {
		return errors.New("sim: provider_config: trailing data after the JSON object")
	}
	n := *c
	setDur := func(dst *time.Duration, src *jsonDuration) {
		if src != nil {
			*dst = time.Duration(*src)
		}
	}
	setDur(&n.BootTime, j.BootTime)
	setDur(&n.BootJitter, j.BootJitter)
	setDur(&n.ListingLag, j.ListingLag)
	setDur(&n.MeanTimeToFailure, j.MeanTimeToFailure)
	setDur(&n.SuspendLatency, j.SuspendLatency)
	setDur(&n.ResumeLatency, j.ResumeLatency)
	setDur(&n.DeleteLatency, j.DeleteLatency)
	if j.IncreaseFailRate != nil {
		n.IncreaseFailRate = *j.IncreaseFailRate
	}
	if j.NeverReadyRate != nil {
		n.NeverReadyRate = *j.NeverReadyRate
	}
	if j.Quota != nil {
		n.Quota = *j.Quota
	}
	if j.Seed != nil {
		n.Seed = *j.Seed
	}
	if j.SupportsSuspend != nil {
		n.SupportsSuspend = *j.SupportsSuspend
	}
	if j.ReportDeleted != nil {
		n.ReportDeleted = *j.ReportDeleted
	}
	if err := n.Validate(); err != nil {
		return err
	}
	*c = n
	return nil
}
