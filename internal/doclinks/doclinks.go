// Package doclinks checks the links between berth's Markdown pages (the
// README and docs/*.md): every relative link must name a file or directory
// of the repository, and every #anchor a heading of its page, by GitHub's
// rules for heading anchors; and a code block marked
// <!-- copy of: PATH --> must be that file as it is. The README is a front page that sends readers
// into docs/, so a link that goes nowhere is a reader lost; a test runs
// Check over the repository.
package doclinks

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// A Problem is one link that does not resolve.
type Problem struct {
	Page string // the page holding the link, relative to the root
	Line int
	Link string
	Why  string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.Page, p.Line, p.Link, p.Why)
}

// linkRE finds inline links and images, [text](target) and ![alt](target),
// with an optional title after the target.
var linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// Check reads the given pages (paths relative to root) and returns every
// link among them that does not resolve.
func Check(root string, pages []string) ([]Problem, error) {
	anchors := map[string]map[string]bool{} // page path → its anchors, read on demand
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		text, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		a := Anchors(string(text))
		anchors[path] = a
		return a, nil
	}
	var problems []Problem
	for _, page := range pages {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			return nil, err
		}
		for _, l := range Links(string(text)) {
			if why := resolve(root, page, l.Target, anchorsOf); why != "" {
				problems = append(problems, Problem{Page: page, Line: l.Line, Link: l.Target, Why: why})
			}
		}
	}
	return problems, nil
}

// resolve says why target, linked from page, goes nowhere ("" if it resolves).
func resolve(root, page, target string, anchorsOf func(string) (map[string]bool, error)) string {
	if isExternal(target) {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	path := page
	if file != "" {
		path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
		if path == ".." || strings.HasPrefix(path, "../") {
			return "leaves the repository"
		}
		st, err := os.Stat(filepath.Join(root, path))
		if err != nil {
			return "no such file or directory"
		}
		if st.IsDir() || anchor == "" {
			return ""
		}
	}
	if !strings.HasSuffix(path, ".md") {
		return "an anchor into a file that is not Markdown"
	}
	a, err := anchorsOf(path)
	if err != nil {
		return err.Error()
	}
	if !a[anchor] {
		return fmt.Sprintf("%s has no heading with the anchor #%s", path, anchor)
	}
	return ""
}

// schemeRE matches a URL with a scheme (https:, mailto:): not ours to check.
var schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

func isExternal(target string) bool { return schemeRE.MatchString(target) }

// A Link is one link target of a page and the line it is on.
type Link struct {
	Line   int
	Target string
}

// Links returns the link targets of a Markdown text, outside fenced code
// blocks and inline code (where brackets are code, not links).
func Links(text string) []Link {
	var links []Link
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(strings.TrimSpace(line), fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCode(line), -1) {
			links = append(links, Link{Line: i + 1, Target: m[1]})
		}
	}
	return links
}

// fenceOf returns the fence (``` or ~~~ run) a line opens or closes, or "".
// A fence may be indented, as inside a list item.
func fenceOf(line string) string {
	t := strings.TrimLeft(line, " ")
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(t, c+c+c) {
			return strings.Repeat(c, len(t)-len(strings.TrimLeft(t, c)))
		}
	}
	return ""
}

var codeSpanRE = regexp.MustCompile("`+[^`]*`+")

func stripCode(line string) string { return codeSpanRE.ReplaceAllString(line, "``") }

var headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// Anchors returns the anchors GitHub gives the headings of a Markdown text
// (and explicit <a name> / id anchors).
func Anchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(strings.TrimSpace(line), fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		for _, m := range explicitRE.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := Slug(m[1])
		// GitHub numbers repeated headings: x, x-1, x-2, ...
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

var explicitRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)

var inlineLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// Slug is GitHub's anchor for a heading's text: the rendered text (links
// give their text, code spans and emphasis lose their marks) in lower case,
// with everything but letters, digits, spaces, hyphens and underscores
// removed and each space made a hyphen.
func Slug(heading string) string {
	heading = inlineLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var copyRE = regexp.MustCompile(`^<!-- copy of: (\S+) -->$`)

// Copies returns a problem for every code block of page marked
// <!-- copy of: PATH --> (on the line before its fence) whose text is not
// PATH's, relative to root: a copy shown to readers must not drift from
// the file that is built and tested.
func Copies(root, page string) ([]Problem, error) {
	text, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(text), "\n")
	var problems []Problem
	for i := 0; i < len(lines); i++ {
		m := copyRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || fenceOf(lines[i+1]) == "" {
			problems = append(problems, Problem{Page: page, Line: i + 1, Link: m[1], Why: "the marker must be followed by a code block"})
			continue
		}
		var block []string
		j := i + 2
		for ; j < len(lines) && fenceOf(lines[j]) == ""; j++ {
			block = append(block, lines[j])
		}
		want, err := os.ReadFile(filepath.Join(root, m[1]))
		switch {
		case err != nil:
			problems = append(problems, Problem{Page: page, Line: i + 1, Link: m[1], Why: err.Error()})
		case strings.Join(block, "\n")+"\n" != string(want):
			problems = append(problems, Problem{Page: page, Line: i + 1, Link: m[1], Why: "the code block differs from the file: copy the file into the page again"})
		}
		i = j
	}
	return problems, nil
}
