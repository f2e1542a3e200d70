package local

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// deathTailBytes is how much of the end of a sandbox's log a death report
// reads: enough for the Go runtime's fatal error line and a few more.
const deathTailBytes = 4 << 10

// deathNote reads why a sandbox's init process may have ended when berth
// did not stop it: the last lines of its log (its own messages and, when the Go runtime
// aborted it, the runtime's) and, for causes an operator can fix, what to
// do. An unreadable log gives empty strings.
//
// A sandbox that died used to be reported only as gone ("it stopped"):
// at about 2,050 sandboxes on a host with the kernel's default pid_max,
// sandboxes died because no thread could be created, and nothing said so.
func deathNote(dir string) (tail, hint string) {
	f, err := os.Open(filepath.Join(dir, logFile))
	if err != nil {
		return "", ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > deathTailBytes {
		f.Seek(st.Size()-deathTailBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, deathTailBytes))
	return lastLines(b, 3), deathHint(b)
}

// lastLines returns the last n non-empty lines of b, joined by " | ".
func lastLines(b []byte, n int) string {
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			out = append(out, string(l))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, " | ")
}

// deathHint names what to do for the causes of a sandbox's death that are
// the host's, recognised by the Go runtime's messages.
func deathHint(log []byte) string {
	s := string(log)
	switch {
	case strings.Contains(s, "failed to create new OS thread"), strings.Contains(s, "pthread_create failed"):
		return "the host ran out of task IDs (threads and processes): raise kernel.pid_max with `sysctl -w kernel.pid_max=4194304`, or lower max_instances"
	case strings.Contains(s, "runtime: out of memory"), strings.Contains(s, "cannot allocate memory"):
		return "the sandbox ran out of memory: raise memory_max in [autoscaler.provider_config], or give the host more memory"
	}
	return ""
}

// deathSummary is deathNote as one clause of an error message.
func deathSummary(dir string) string {
	tail, hint := deathNote(dir)
	switch {
	case tail == "":
		return "the sandbox ended without berth stopping it and left no log"
	case hint == "":
		return "the sandbox ended without berth stopping it; its log ends: " + tail
	}
	return "the sandbox ended without berth stopping it (" + hint + "); its log ends: " + tail
}
