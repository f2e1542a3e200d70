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
	// prefixes start tokens whose rest is masked, as gitlab-runner's
	// token sanitizer does: "glpat-abc" becomes "glpat-[MASKED]".
	prefixes [][]byte
	pending  []byte
}

// defaultTokenPrefixes are masked whatever GitLab sends, as gitlab-runner
// does (common/buildlogger/internal/tokensanitizer).
var defaultTokenPrefixes = []string{"glpat-"}

// maxTokenPrefixes bounds GitLab's features.token_mask_prefixes, as
// gitlab-runner does.
const maxTokenPrefixes = 15

// tokenChar says whether c can be part of a token after its prefix
// (gitlab-runner's alphabet).
func tokenChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '.' || c == '_' || c == '='
}

func newMasker(secrets, prefixes []string) *masker {
	m := &masker{}
	seenPrefix := map[string]bool{}
	for _, p := range append(append([]string(nil), defaultTokenPrefixes...), prefixes...) {
		if p != "" && !seenPrefix[p] && len(m.prefixes) < maxTokenPrefixes+len(defaultTokenPrefixes) {
			seenPrefix[p] = true
			m.prefixes = append(m.prefixes, []byte(p))
		}
	}
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
	if len(m.secrets) == 0 && len(m.prefixes) == 0 {
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
		if p, n, open := m.token(rest); n > 0 {
			if open {
				// The token may go on in the next write.
				m.pending = append([]byte(nil), rest...)
				break
			}
			out = append(append(out, p...), maskedText...)
			i += len(p) + n
			continue
		}
		out = append(out, data[i])
		i++
	}
	return out
}

// token finds a prefixed token at the start of rest: the prefix, the
// length of the token's rest, and whether rest ends inside the token.
func (m *masker) token(rest []byte) (prefix []byte, n int, open bool) {
	for _, p := range m.prefixes {
		if !bytes.HasPrefix(rest, p) {
			continue
		}
		n := 0
		for len(p)+n < len(rest) && tokenChar(rest[len(p)+n]) {
			n++
		}
		if n > 0 || len(p) == len(rest) {
			return p, max(n, 1), len(p)+n == len(rest)
		}
	}
	return nil, 0, false
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
		if pre, n, _ := m.token(p[i:]); n > 0 && len(pre)+n <= len(p)-i && tokenChar(p[i+len(pre)]) {
			out = append(append(out, pre...), maskedText...)
			i += len(pre) + n
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
	for _, set := range [2][][]byte{m.secrets, m.prefixes} {
		for _, s := range set {
			if len(rest) < len(s) && bytes.HasPrefix(s, rest) {
				return true
			}
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
