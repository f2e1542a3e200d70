// Package jsonconfig decodes a provider plugin's provider_config the way
// every built-in cloud provider does: strictly (an unknown key is an
// error that lists the known ones, so a typo never falls back to a
// default silently), with durations written as Go durations or seconds.
package jsonconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Duration is a duration in provider_config: a Go duration string
// ("10m", "90s") or a number of seconds.
type Duration time.Duration

// UnmarshalJSON reads "10m" or 600.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want a Go duration such as \"10m\" or \"90s\"", s)
		}
		*d = Duration(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"10m\" or a number of seconds", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// Decode reads one JSON object from b into v. Errors start with
// provider + ": provider_config"; an empty b says what to set (empty), and
// an unknown or mistyped key lists knownKeys.
func Decode(b []byte, v any, provider, empty, knownKeys string) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return fmt.Errorf("%s: provider_config is empty; %s", provider, empty)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: provider_config: %w (known keys: %s)", provider, err, knownKeys)
	}
	if dec.More() {
		return errors.New(provider + ": provider_config: trailing data after the JSON object")
	}
	return nil
}
