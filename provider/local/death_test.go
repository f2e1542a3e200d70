package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDeathNoteSaysWhyASandboxEnded(t *testing.T) {
	for _, c := range []struct {
		name, log, tail, hint string
	}{
		{"no log", "", "", ""},
		{"threads", "time=… level=INFO msg=\"sandbox serving SSH\"\nruntime: failed to create new OS thread (have 5 already; errno=11)\nruntime: may need to increase max user processes (ulimit -u)\nfatal error: newosproc\n",
			"runtime: failed to create new OS thread (have 5 already; errno=11) | runtime: may need to increase max user processes (ulimit -u) | fatal error: newosproc", "kernel.pid_max"},
		{"memory", "fatal error: runtime: out of memory\n", "fatal error: runtime: out of memory", "memory_max"},
		{"other", "a\nb\n\n", "a | b", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.log != "" {
				if err := os.WriteFile(filepath.Join(dir, logFile), []byte(c.log), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			tail, hint := deathNote(dir)
			if tail != c.tail {
				t.Errorf("tail %q, want %q", tail, c.tail)
			}
			if (c.hint == "") != (hint == "") || !strings.Contains(hint, c.hint) {
				t.Errorf("hint %q, want one naming %q", hint, c.hint)
			}
		})
	}
}

func TestDeathNoteReadsOnlyTheEndOfALongLog(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 3*deathTailBytes) + "\nthe last line\n"
	if err := os.WriteFile(filepath.Join(dir, logFile), []byte(long), 0o600); err != nil {
		t.Fatal(err)
	}
	if tail, _ := deathNote(dir); !strings.HasSuffix(tail, "the last line") || len(tail) > deathTailBytes+20 {
		t.Errorf("tail of %d bytes ending %q", len(tail), tail[max(0, len(tail)-20):])
	}
}

func TestDeathSummaryNamesTheCause(t *testing.T) {
	dir := t.TempDir()
	if got := deathSummary(dir); got != "the sandbox ended without berth stopping it and left no log" {
		t.Errorf("no log: %q", got)
	}
	os.WriteFile(filepath.Join(dir, logFile), []byte("fatal error: runtime: out of memory\n"), 0o600)
	if got := deathSummary(dir); !strings.Contains(got, "memory_max") || !strings.HasSuffix(got, "its log ends: fatal error: runtime: out of memory") {
		t.Errorf("out of memory: %q", got)
	}
}
