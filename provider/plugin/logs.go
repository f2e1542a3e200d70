package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
)

// logWriter receives the plugin's stderr and logs each line through berth's
// logger with the plugin's name. Lines in hclog's JSON form (what sdk.Logger
// and go-plugin write) keep their level, message and attributes; anything
// else (a panic's stack trace, fmt.Fprintln to stderr) is logged as it is.
// It never fails and never panics, whatever the plugin writes.
type logWriter struct {
	log *slog.Logger

	mu      sync.Mutex
	buf     []byte
	inPanic bool
}

// maxLine bounds a buffered line, so a plugin writing without newlines
// cannot grow berth's memory.
const maxLine = 64 << 10

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxLine {
				w.line(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *logWriter) line(b []byte) {
	b = bytes.TrimRight(b, "\r")
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	var m map[string]any
	if b[0] == '{' && json.Unmarshal(b, &m) == nil {
		if msg, ok := m["@message"].(string); ok {
			level := slog.LevelInfo
			if l, ok := m["@level"].(string); ok {
				level = parseLevel(l)
			}
			keys := make([]string, 0, len(m))
			for k := range m {
				if k != "@message" && k != "@level" && k != "@timestamp" && k != "@module" && k != "@caller" {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			attrs := make([]any, 0, 2*len(keys))
			for _, k := range keys {
				attrs = append(attrs, k, fmt.Sprint(m[k]))
			}
			w.log.Log(context.Background(), level, msg, attrs...)
			return
		}
	}
	s := string(b)
	level := slog.LevelInfo
	if strings.HasPrefix(s, "panic: ") || strings.HasPrefix(s, "fatal error: ") {
		w.inPanic = true
	}
	if w.inPanic {
		level = slog.LevelError
	}
	w.log.Log(context.Background(), level, s)
}

func parseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "trace", "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error", "fatal":
		return slog.LevelError
	}
	return slog.LevelInfo
}
