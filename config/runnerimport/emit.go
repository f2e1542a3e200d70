package runnerimport

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// block is the text of one TOML table being written: its header, its
// key = value lines and the comments that explain what was left out.
type block struct {
	header string // "[autoscaler]", "" for the top level
	lines  []string
}

func (b *block) set(k string, v any) { b.lines = append(b.lines, k+" = "+value(v)) }

// note adds a comment, one "# " line per line of text.
func (b *block) note(format string, args ...any) {
	for _, l := range strings.Split(fmt.Sprintf(format, args...), "\n") {
		b.lines = append(b.lines, strings.TrimRight("# "+l, " "))
	}
}

// dropped records a GitLab key that has no berth equivalent: its value
// (secrets hidden) and why, with what to do instead.
func (b *block) dropped(gitlabKey string, v any, why string) {
	b.note("%s = %s: %s", gitlabKey, value(hide(gitlabKey, v)), why)
}

func (b *block) empty() bool { return len(b.lines) == 0 }

func (b *block) write(sb *strings.Builder) {
	if b.header != "" {
		sb.WriteString("\n" + b.header + "\n")
	}
	for _, l := range b.lines {
		sb.WriteString(l + "\n")
	}
}

// value renders v as a TOML value.
func value(v any) string {
	switch x := v.(type) {
	case string:
		return quote(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		s := strconv.FormatFloat(x, 'f', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return s
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.Format(time.RFC3339)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = value(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []string:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = quote(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + " = " + value(hide(k, x[k]))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	case []map[string]any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = value(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		return quote(fmt.Sprint(x))
	}
}

// quote writes a TOML basic string. Go's strconv.Quote is close but may
// write \x escapes, which TOML does not have.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// secretWords mark keys (and docker-machine options) whose values are
// credentials: they never reach the output, not even in a comment.
var secretWords = []string{"token", "secret", "password", "access-key", "accesskey", "access_key", "sentry_dsn", "private-key", "private_key"}

func isSecret(key string) bool {
	k := strings.ToLower(key)
	if strings.HasSuffix(k, "_at") { // token_obtained_at, token_expires_at: dates
		return false
	}
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// hide replaces the value of a secret key by a placeholder; in an array of
// "name=value" options (MachineOptions) it hides the secret options' values.
func hide(key string, v any) any {
	if isSecret(key) {
		return "<hidden>"
	}
	if arr, ok := v.([]any); ok {
		out := make([]any, len(arr))
		for i, e := range arr {
			out[i] = e
			if s, ok := e.(string); ok {
				if name, _, found := strings.Cut(s, "="); found && isSecret(name) {
					out[i] = name + "=<hidden>"
				}
			}
		}
		return out
	}
	return v
}
