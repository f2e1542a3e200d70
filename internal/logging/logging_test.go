package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
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

func TestJSONDurationsAreSecondsAsFloats(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, Settings{Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("job started", "queue_wait", 71440545*time.Nanosecond, "n", 3)
	log.WithGroup("boot").Info("ready", "took", 90*time.Second)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var rec, grouped map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["queue_wait"] != 0.071440545 || rec["n"] != float64(3) {
		t.Errorf("queue_wait = %v (%T), n = %v; want 0.071440545 seconds and 3 untouched", rec["queue_wait"], rec["queue_wait"], rec["n"])
	}
	if err := json.Unmarshal([]byte(lines[1]), &grouped); err != nil {
		t.Fatal(err)
	}
	if g, _ := grouped["boot"].(map[string]any); g == nil || g["took"] != float64(90) {
		t.Errorf("a duration in a group: %v, want boot.took = 90", grouped)
	}
	// Text keeps Go's notation, which people read.
	buf.Reset()
	text, _ := New(&buf, Settings{})
	text.Info("job started", "queue_wait", 71440545*time.Nanosecond)
	if !strings.Contains(buf.String(), "queue_wait=71.440545ms") {
		t.Errorf("text line %q, want queue_wait=71.440545ms", buf.String())
	}
}

func TestExitLineFollowsTheFormat(t *testing.T) {
	defer func(old Settings) { current = old }(current)
	var buf bytes.Buffer
	if _, err := Setup(&bytes.Buffer{}, Settings{Format: "json"}); err != nil {
		t.Fatal(err)
	}
	Exit(&buf, errors.New("start: listen tcp 127.0.0.1:8765: address already in use"))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("the exit line %q is not JSON: %v", buf.String(), err)
	}
	if rec["level"] != "ERROR" || !strings.Contains(rec["err"].(string), "address already in use") {
		t.Errorf("exit record %v", rec)
	}
	buf.Reset()
	if _, err := Setup(&bytes.Buffer{}, Settings{Format: "text"}); err != nil {
		t.Fatal(err)
	}
	Exit(&buf, errors.New("bad"))
	if buf.String() != "berth: bad\n" {
		t.Errorf("text exit line %q, want %q", buf.String(), "berth: bad\n")
	}
}
