package gitlab

import (
	"bytes"
	"sort"
)

// maskedText replaces a masked variable's value in the log, as GitLab does.
const maskedText = "[MASKED]"

// masker replaces secrets in a byte stream that arrives in arbitrary pieces.
// A secret may be split across writes, so bytes that could be the start of a
// secret are held back until the next write (or flush) decides.
type masker struct {
	secrets [][]byte // longest first, so the longest match wins
	pending []byte
}

func newMasker(secrets []string) *masker {
	m := &masker{}
	seen := map[string]bool{}
	for _, s := range secrets {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		m.secrets = append(m.secrets, []byte(s))
	}
	sort.Slice(m.secrets, func(i, j int) bool { return len(m.secrets[i]) > len(m.secrets[j]) })
	return m
}

// write masks p (after anything held back) and returns what can be emitted now.
func (m *masker) write(p []byte) []byte {
	if len(m.secrets) == 0 {
		return p
	}
	data := append(m.pending, p...)
	m.pending = nil
	var out []byte
	for i := 0; i < len(data); {
		rest := data[i:]
		if m.couldStart(rest) {
			// The tail may still become a secret: keep it for the next write.
			m.pending = append([]byte(nil), rest...)
			break
		}
		if n := m.match(rest); n > 0 {
			out = append(out, maskedText...)
			i += n
			continue
		}
		out = append(out, data[i])
		i++
	}
	return out
}

// flush emits what was held back; at the end of the log a partial secret is
// not a secret.
func (m *masker) flush() []byte {
	p := m.pending
	m.pending = nil
	if len(p) == 0 {
		return nil
	}
	// The held-back bytes may still contain a shorter complete secret.
	var out []byte
	for i := 0; i < len(p); {
		if n := m.match(p[i:]); n > 0 {
			out = append(out, maskedText...)
			i += n
			continue
		}
		out = append(out, p[i])
		i++
	}
	return out
}

// couldStart reports whether rest is a proper prefix of some secret, i.e. it
// ends before a secret that starts here could be recognised.
func (m *masker) couldStart(rest []byte) bool {
	for _, s := range m.secrets {
		if len(rest) < len(s) && bytes.HasPrefix(s, rest) {
			return true
		}
	}
	return false
}

// match returns the length of the longest secret rest starts with, or 0.
func (m *masker) match(rest []byte) int {
	for _, s := range m.secrets {
		if bytes.HasPrefix(rest, s) {
			return len(s)
		}
	}
	return 0
}
