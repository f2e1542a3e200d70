package config

import (
	"errors"
	"strings"
	"testing"
)

// Issue 9, item 4: [autoscaler.policy] written as a single table used to be
// accepted without a word. berth accepts it as one period, and says so.
func TestSinglePolicyTableIsOnePeriodWithAWarning(t *testing.T) {
	c, err := Parse([]byte("[autoscaler]\nmax_instances = 3\n[autoscaler.policy]\nidle_count = 2\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Autoscaler.Policies) != 1 || c.Autoscaler.Policies[0].Policy.IdleCount != 2 {
		t.Fatalf("policies = %+v, want one period with idle_count 2", c.Autoscaler.Policies)
	}
	var found bool
	for _, w := range c.Warnings {
		if w.Key == "autoscaler.policy" && w.Line == 3 && strings.Contains(w.Message, "one policy period") && strings.Contains(w.Message, "[[autoscaler.policy]]") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no warning at berth.toml:3 saying how the single table is read; warnings: %v", c.Warnings)
	}

	c, err = Parse([]byte("[[autoscaler.policy]]\nidle_count = 2\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Fatalf("warnings for [[autoscaler.policy]]: %v", c.Warnings)
	}
}

// WithProviderCheck reports provider problems with every other problem, at
// their lines.
func TestProviderCheckProblemsComeWithTheOthers(t *testing.T) {
	check := func(name, _ string, raw []byte) []ProviderProblem {
		if name != "local" {
			return []ProviderProblem{{Name: true, Message: "unknown provider " + name}}
		}
		return []ProviderProblem{{Key: "netwrk", Message: "unknown key"}, {Message: "whole table"}}
	}
	_, err := Parse([]byte("[autoscaler]\nprovider = \"awz\"\nmax_instances = 0\n"), "b.toml", WithProviderCheck(check))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Issues) != 2 {
		t.Fatalf("err = %v, want two issues", err)
	}
	if got := ce.Issues[0].String(); !strings.HasPrefix(got, `b.toml:2: autoscaler.provider = "awz": unknown provider awz`) {
		t.Errorf("issue 0 = %s", got)
	}
	_, err = Parse([]byte("[autoscaler]\nmax_instances = 0\n[autoscaler.provider_config]\nnetwrk = 1\n"), "b.toml", WithProviderCheck(check))
	if !errors.As(err, &ce) || len(ce.Issues) != 3 {
		t.Fatalf("err = %v, want three issues", err)
	}
	for _, want := range []string{"b.toml:2: autoscaler.max_instances", "b.toml:4: autoscaler.provider_config.netwrk: unknown key", "b.toml:3: autoscaler.provider_config = {...}: whole table"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
