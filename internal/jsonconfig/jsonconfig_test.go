package jsonconfig

import (
	"strings"
	"testing"
	"time"
)

type sample struct {
	Name    string    `json:"name"`
	Timeout *Duration `json:"timeout"`
}

func TestDecodeRefusesWhatIsNotTheConfig(t *testing.T) {
	for in, want := range map[string]string{
		"  ":                 "x: provider_config is empty; set name",
		`{"nme": "a"}`:       `unknown field "nme" (known keys: name, timeout)`,
		`{"name": "a"} {}`:   "trailing data",
		`{"timeout": "ten"}`: `want a Go duration such as "10m"`,
		`{"timeout": true}`:  "a number of seconds",
	} {
		var v sample
		if err := Decode([]byte(in), &v, "x", "set name", "name, timeout"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

func TestDurationsAsStringsOrSeconds(t *testing.T) {
	for in, want := range map[string]time.Duration{`{"timeout": 90}`: 90 * time.Second, `{"timeout": "10m"}`: 10 * time.Minute, `{"timeout": 0.5}`: 500 * time.Millisecond} {
		var v sample
		if err := Decode([]byte(in), &v, "x", "", ""); err != nil || v.Timeout == nil || time.Duration(*v.Timeout) != want {
			t.Errorf("%s: %v %+v, want %v", in, err, v, want)
		}
	}
}
