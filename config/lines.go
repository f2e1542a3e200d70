package config

import (
	"strconv"
	"strings"
)

// BurntSushi/toml records key positions internally but does not export them,
// and it keys them without array-of-tables indices (so the line it has for
// "autoscaler.policy.idle_count" is that of the last policy). To point every
// message at the right line, lineIndex re-scans the already-validated
// document and records, for each key path, the line where it is defined.
// Paths use the same spelling as the decoder: "autoscaler.policy[1].idle_count".
//
// The scanner only runs on input that toml.Decode accepted, so it can be
// lenient; it still must terminate and never panic on any input.

type lineIndex map[string]int

// line returns the line of path, or of its nearest ancestor that has one
// (keys inside inline tables and arrays are attributed to the line of the
// enclosing key), or 0 when nothing is known.
func (ix lineIndex) line(path string) int {
	for path != "" {
		if l, ok := ix[path]; ok {
			return l
		}
		path = parentPath(path)
	}
	return 0
}

// parentPath strips the last segment ("a.b[2]" → "a.b", "a.b" → "a").
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	// Quoted segments may contain dots; walk back over a trailing quote.
	if strings.HasSuffix(path, `"`) {
		for i := len(path) - 2; i >= 0; i-- {
			if path[i] == '"' && (i == 0 || path[i-1] != '\\') {
				if i > 0 && path[i-1] == '.' {
					return path[:i-1]
				}
				return ""
			}
		}
		return ""
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// joinKey appends one key segment to a path, quoting segments that are not
// bare TOML keys so that paths stay unambiguous.
func joinKey(prefix, part string) string {
	if !isBare(part) {
		part = strconv.Quote(part)
	}
	if prefix == "" {
		return part
	}
	return prefix + "." + part
}

func isBare(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isBareChar(s[i]) {
			return false
		}
	}
	return true
}

func isBareChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

type scanner struct {
	src    string
	pos    int
	line   int
	ix     lineIndex
	arrays map[string]int // resolved array-of-tables path → number of elements so far
}

func indexLines(src string) lineIndex {
	s := &scanner{src: src, line: 1, ix: lineIndex{}, arrays: map[string]int{}}
	table := ""
	for {
		s.skipSpaceAndComments(true)
		if s.pos >= len(s.src) {
			return s.ix
		}
		start := s.pos
		if s.src[s.pos] == '[' {
			table = s.header()
		} else {
			s.keyValue(table)
		}
		s.skipToEOL()
		if s.pos == start {
			s.advance() // guarantee progress on input we do not understand
		}
	}
}

func (s *scanner) peek() byte {
	if s.pos < len(s.src) {
		return s.src[s.pos]
	}
	return 0
}

func (s *scanner) advance() {
	if s.pos < len(s.src) {
		if s.src[s.pos] == '\n' {
			s.line++
		}
		s.pos++
	}
}

func (s *scanner) record(path string) {
	if _, ok := s.ix[path]; !ok {
		s.ix[path] = s.line
	}
}

// skipSpaceAndComments skips blanks and comments, and newlines too when nl.
func (s *scanner) skipSpaceAndComments(nl bool) {
	for s.pos < len(s.src) {
		switch c := s.src[s.pos]; {
		case c == ' ' || c == '\t' || c == '\r':
			s.pos++
		case c == '\n' && nl:
			s.advance()
		case c == '#':
			for s.pos < len(s.src) && s.src[s.pos] != '\n' {
				s.pos++
			}
		default:
			return
		}
	}
}

func (s *scanner) skipToEOL() {
	for s.pos < len(s.src) && s.src[s.pos] != '\n' {
		s.pos++
	}
}

// header parses "[a.b]" or "[[a.b]]" and returns the resolved path of the
// table it opens.
func (s *scanner) header() string {
	s.pos++ // '['
	array := s.peek() == '['
	if array {
		s.pos++
	}
	parts := s.key()
	resolved := ""
	for i, part := range parts {
		p := joinKey(resolved, part)
		if i == len(parts)-1 && array {
			s.record(p) // the array as a whole points at its first element
			n := s.arrays[p]
			s.arrays[p] = n + 1
			p += "[" + strconv.Itoa(n) + "]"
		} else if n, ok := s.arrays[p]; ok && n > 0 {
			p += "[" + strconv.Itoa(n-1) + "]" // a sub-table of the latest element
		}
		resolved = p
	}
	s.record(resolved)
	return resolved
}

// key parses a possibly dotted, possibly quoted key and stops before '=' or ']'.
func (s *scanner) key() []string {
	var parts []string
	for {
		s.skipSpaceAndComments(false)
		switch c := s.peek(); {
		case c == '"' || c == '\'':
			parts = append(parts, s.quotedKey(c))
		case isBareChar(c):
			start := s.pos
			for s.pos < len(s.src) && isBareChar(s.src[s.pos]) {
				s.pos++
			}
			parts = append(parts, s.src[start:s.pos])
		default:
			return parts
		}
		s.skipSpaceAndComments(false)
		if s.peek() != '.' {
			return parts
		}
		s.pos++
	}
}

func (s *scanner) quotedKey(q byte) string {
	start := s.pos
	s.pos++
	for s.pos < len(s.src) && s.src[s.pos] != q && s.src[s.pos] != '\n' {
		if q == '"' && s.src[s.pos] == '\\' && s.pos+1 < len(s.src) {
			s.pos++
		}
		s.pos++
	}
	if s.pos < len(s.src) && s.src[s.pos] == q {
		s.pos++
	}
	raw := s.src[start:min(s.pos, len(s.src))]
	if q == '"' {
		if u, err := strconv.Unquote(raw); err == nil {
			return u
		}
	}
	return strings.Trim(raw, string(q))
}

// keyValue parses "key = value" in table and records the key (and keys of
// inline tables in the value).
func (s *scanner) keyValue(table string) {
	parts := s.key()
	if len(parts) == 0 {
		return
	}
	path := table
	for _, p := range parts {
		path = joinKey(path, p)
		s.record(path) // dotted keys define their intermediate tables here too
	}
	s.skipSpaceAndComments(false)
	if s.peek() != '=' {
		return
	}
	s.pos++
	s.skipSpaceAndComments(false)
	s.value(path)
}

// value skips one value, recording keys inside inline tables under path.
func (s *scanner) value(path string) {
	switch c := s.peek(); c {
	case '"', '\'':
		s.skipString(c)
	case '[':
		s.pos++
		for i := 0; ; {
			s.skipSpaceAndComments(true)
			switch s.peek() {
			case 0:
				return
			case ']':
				s.pos++
				return
			case ',':
				s.pos++
				i++
				continue
			}
			before := s.pos
			elem := path + "[" + strconv.Itoa(i) + "]"
			s.record(elem)
			s.value(elem)
			if s.pos == before {
				s.advance()
			}
		}
	case '{':
		s.pos++
		for {
			s.skipSpaceAndComments(true) // TOML 1.1 allows newlines here
			switch s.peek() {
			case 0:
				return
			case '}':
				s.pos++
				return
			case ',':
				s.pos++
				continue
			}
			before := s.pos
			s.keyValue(path)
			if s.pos == before {
				s.advance()
			}
		}
	default:
		for s.pos < len(s.src) && !strings.ContainsRune(",]}#\n", rune(s.src[s.pos])) {
			s.pos++
		}
	}
}

// skipString skips a basic, literal or multi-line string starting at pos.
func (s *scanner) skipString(q byte) {
	triple := strings.HasPrefix(s.src[s.pos:], strings.Repeat(string(q), 3))
	if triple {
		s.pos += 3
		for s.pos < len(s.src) {
			if q == '"' && s.src[s.pos] == '\\' {
				s.advance()
				s.advance()
				continue
			}
			if strings.HasPrefix(s.src[s.pos:], strings.Repeat(string(q), 3)) {
				s.pos += 3
				// Up to two more quotes may belong to the content ("""a"""""").
				for i := 0; i < 2 && s.peek() == q; i++ {
					s.pos++
				}
				return
			}
			s.advance()
		}
		return
	}
	s.pos++
	for s.pos < len(s.src) && s.src[s.pos] != q && s.src[s.pos] != '\n' {
		if q == '"' && s.src[s.pos] == '\\' && s.pos+1 < len(s.src) {
			s.pos++
		}
		s.pos++
	}
	if s.peek() == q {
		s.pos++
	}
}
