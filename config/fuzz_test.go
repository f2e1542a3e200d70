package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, that every rejection is
// an *Error whose issues say something, and that every accepted config is
// valid and yields a policy schedule. It also fuzzes the line scanner on raw
// input, which Parse only feeds with valid TOML.
func FuzzParse(f *testing.F) {
	if sample, err := os.ReadFile("testdata/berth.toml"); err == nil {
		f.Add(sample)
	}
	for _, s := range []string{
		"",
		"listen = \"127.0.0.1:1\"\n",
		"[source]\nkind = \"gitlab\"\nurl = \"https://gitlab.com\"\ntoken = \"t\"\n",
		"source = [{kind = \"queue\"}, {kind = 1}]\n",
		"[[autoscaler.policy]]\nperiods = [\"* 8-17 * * mon-fri\"]\ntimezone = \"Europe/Berlin\"\n",
		"[[autoscaler.policy]]\nperiods = [\"TZ=UTC\"]\n",
		"[autoscaler]\nscale_throttle = { limit = 1, burst = 2 }\nprovider_config = { a = [1, {b = nan}] }\n",
		"s = \"\"\"\nk = 1\n\"\"\"\n[\"a.b\".c]\n'd' = '''x'''\n",
		"[[a]]\n[[a.b]]\n[a.b.c]\n[[a]]\n",
		"state_dir = \"~/x\"\njob_timeout = \"-1h\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		indexLines(string(data))
		c, err := Parse(data, "fuzz.toml")
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Issues) == 0 {
				t.Fatalf("error is not an *Error with issues: %#v", err)
			}
			for _, is := range ce.Issues {
				if is.Message == "" {
					t.Fatalf("issue without message: %#v", is)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that Validate rejects: %v", err)
		}
		if _, err := c.Autoscaler.NewSchedule(); err != nil {
			t.Fatalf("Parse accepted policies NewSchedule rejects: %v", err)
		}
	})
}
