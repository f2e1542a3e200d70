// Package logging builds the one slog handler every line berth writes goes
// through: the daemon, the providers it runs in-process, the sandboxes of
// the local provider (separate processes that learn the settings from their
// environment) and the plugins (whose lines berth re-logs).
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// The formats log_format accepts.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Environment variables that carry the settings to berth's own child
// processes (sandboxes), whose environment is otherwise cleared.
const (
	envLevel  = "BERTH_LOG_LEVEL"
	envFormat = "BERTH_LOG_FORMAT"
)

// Settings say how berth logs.
type Settings struct {
	// Level is "debug", "info", "warn" or "error"; empty means info.
	Level string
	// Format is FormatText or FormatJSON; empty means text.
	Format string
}

// New returns a logger writing to w with s's level and format.
func New(w io.Writer, s Settings) (*slog.Logger, error) {
	var level slog.Level
	if s.Level != "" {
		if err := level.UnmarshalText([]byte(s.Level)); err != nil {
			return nil, fmt.Errorf("log level %q: want debug, info, warn or error", s.Level)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(s.Format) {
	case "", FormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case FormatJSON:
		opts.ReplaceAttr = secondsForDurations
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want %q or %q", s.Format, FormatText, FormatJSON)
}

// secondsForDurations writes durations in JSON as seconds (a float), the
// unit Prometheus and most log queries use; slog's JSON handler would write
// nanoseconds as an integer ("queue_wait":71440545), which nobody reads
// right. Text lines keep Go's "71.44ms", which people do read right.
func secondsForDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.Float64Value(a.Value.Duration().Seconds())
	}
	return a
}

// Exit writes err, the reason berth exits with an error, as its last line
// on w: a JSON object like every other line when the last Setup chose JSON
// (a log shipper reading journald parses the line that matters most), else
// "berth: " and the error, for people.
func Exit(w io.Writer, err error) {
	if strings.EqualFold(current.Format, FormatJSON) {
		if log, e := New(w, Settings{Format: FormatJSON}); e == nil {
			log.Error("berth exits with an error", "err", err.Error())
			return
		}
	}
	fmt.Fprintln(w, "berth:", err)
}

// Setup makes s the process's default (slog.SetDefault, which also routes
// the standard log package through it) and remembers it for Env, so that
// code that takes slog.Default and the processes berth starts log alike.
// Its level can change later with SetLevel (a config reload).
func Setup(w io.Writer, s Settings) (*slog.Logger, error) {
	inner, err := New(w, Settings{Level: "debug", Format: s.Format})
	if err != nil {
		return nil, err
	}
	if err := SetLevel(s.Level); err != nil {
		return nil, err
	}
	log := slog.New(&levelHandler{Handler: inner.Handler()})
	slog.SetDefault(log)
	current = s
	return log, nil
}

// level is the level of the logger Setup made; SetLevel changes it.
var level slog.LevelVar

// SetLevel changes the level of the logger Setup made, and of the
// processes berth starts from now on.
func SetLevel(s string) error {
	var l slog.Level
	if s == "" {
		s = "info"
	}
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	level.Set(l)
	if current.Level != "" || s != "info" {
		current.Level = s
	}
	return nil
}

// levelHandler filters by SetLevel's level in front of a handler New made
// at the lowest level (slog handlers check the level only in Enabled).
type levelHandler struct{ slog.Handler }

func (h *levelHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= level.Level() }

func (h *levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &levelHandler{Handler: h.Handler.WithAttrs(as)}
}

func (h *levelHandler) WithGroup(name string) slog.Handler {
	return &levelHandler{Handler: h.Handler.WithGroup(name)}
}

// current is what Setup was last given; Env passes it on.
var current Settings

// Env returns the environment entries that give a child process started by
// berth (with a cleared environment) the settings of the last Setup.
func Env() []string {
	var env []string
	if current.Level != "" {
		env = append(env, envLevel+"="+current.Level)
	}
	if current.Format != "" {
		env = append(env, envFormat+"="+current.Format)
	}
	return env
}

// FromEnv returns a logger to w configured by Env's entries in this
// process's environment; unknown values fall back to info and text, since
// a child must log something rather than fail over its log settings.
func FromEnv(w io.Writer) *slog.Logger {
	s := Settings{Level: os.Getenv(envLevel), Format: os.Getenv(envFormat)}
	if log, err := New(w, s); err == nil {
		return log
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
