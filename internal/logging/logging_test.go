package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONFormatWritesOneObjectPerLine(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, Settings{Level: "warn", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("dropped below the level")
	log.Warn("scale up", "n", 3)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want only the warning, got %q", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not JSON: %q: %v", lines[0], err)
	}
	if rec["msg"] != "scale up" || rec["n"] != float64(3) {
		t.Fatalf("record %v", rec)
	}
}

func TestBadSettingsAreRefusedWithTheChoices(t *testing.T) {
	for _, s := range []Settings{{Format: "logfmt"}, {Level: "verbose"}} {
		if _, err := New(&bytes.Buffer{}, s); err == nil || !strings.Contains(err.Error(), "want") {
			t.Errorf("%+v: err = %v, want the accepted values named", s, err)
		}
	}
}

func TestChildrenInheritTheSettingsThroughTheirEnvironment(t *testing.T) {
	var buf bytes.Buffer
	if _, err := Setup(&buf, Settings{Level: "debug", Format: "json"}); err != nil {
		t.Fatal(err)
	}
	for _, kv := range Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var child bytes.Buffer
	FromEnv(&child).Debug("from the sandbox")
	if !strings.HasPrefix(child.String(), "{") || !strings.Contains(child.String(), "from the sandbox") {
		t.Fatalf("child logged %q, want a JSON debug line", child.String())
	}
}
