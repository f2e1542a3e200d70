package doclinks

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pagesOf lists the README and docs/*.md below root.
func pagesOf(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		pages = append(pages, filepath.ToSlash(strings.TrimPrefix(d, root+"/")))
	}
	if len(pages) < 10 {
		t.Fatalf("found only %v in %s: is the test run from internal/doclinks?", pages, root)
	}
	return pages
}

// TestReleaseTarballLinks checks the pages as the release tarball ships
// them (packaging/release.sh): every link resolves inside the tarball too.
func TestReleaseTarballLinks(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("bash", "../../packaging/release.sh", "--docs-only", dir).CombinedOutput(); err != nil {
		t.Fatalf("release.sh --docs-only: %v\n%s", err, out)
	}
	problems, err := Check(dir, pagesOf(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("in the release tarball: %s", p)
	}
}

// TestRepositoryLinks checks every link of the README and of docs/*.md.
func TestRepositoryLinks(t *testing.T) {
	root := "../.."
	pages := pagesOf(t, root)
	problems, err := Check(root, pages)
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, page := range pages {
		c, err := Copies(root, page)
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, c...)
		text, _ := os.ReadFile(filepath.Join(root, page))
		copies += strings.Count(string(text), "<!-- copy of: ")
	}
	for _, p := range problems {
		t.Error(p)
	}
	if copies == 0 {
		t.Error("no page marks a copy of a file: the plugin example of docs/plugins.md should be one")
	}
}

func TestCopiesFindsADriftedCopy(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	page := "# P\n<!-- copy of: main.go -->\n```go\npackage main\n\nfunc main() {}\n```\n<!-- copy of: main.go -->\n```go\npackage main\n```\n"
	os.WriteFile(filepath.Join(root, "p.md"), []byte(page), 0o644)
	problems, err := Copies(root, "p.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Line != 8 {
		t.Errorf("problems %v, want one: the second, shortened copy at line 8", problems)
	}
}

// TestREADMEIsAFrontPage keeps the README short: the details belong on the
// pages in docs/ it links to, and every page there is reachable from it.
func TestREADMEIsAFrontPage(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "\n"); n > 400 {
		t.Errorf("README.md has %d lines; keep it a front page of at most 400 and move details into docs/", n)
	}
	linked := map[string]bool{}
	for _, l := range Links(string(text)) {
		file, _, _ := strings.Cut(l.Target, "#")
		linked[file] = true
	}
	index, err := os.ReadFile("../../docs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	indexed := map[string]bool{}
	for _, l := range Links(string(index)) {
		file, _, _ := strings.Cut(l.Target, "#")
		indexed[file] = true
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, d := range docs {
		name := "docs/" + filepath.Base(d)
		if name == "docs/README.md" {
			continue
		}
		if !linked[name] {
			t.Errorf("%s is not linked from README.md: a reader of the front page cannot find it", name)
		}
		if !indexed[filepath.Base(d)] {
			t.Errorf("%s is not linked from docs/README.md, the index of docs/", name)
		}
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quickstart (two commands)", "quickstart-two-commands"},
		{"`[images]`: jobs that name an image", "images-jobs-that-name-an-image"},
		{"5. Reliability round 2 (issue 19)", "5-reliability-round-2-issue-19"},
		{"Suspended tier, prediction and target_wait", "suspended-tier-prediction-and-target_wait"},
		{"Invariants I1–I8", "invariants-i1i8"},
		{"Use [AWS](aws.md) now", "use-aws-now"},
		{"Größe ändern", "größe-ändern"},
	} {
		if got := Slug(c.heading); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestAnchorsNumberRepeatedHeadings(t *testing.T) {
	a := Anchors("# A\n## Figures\ntext\n## Figures\n```sh\n# not a heading\n```\n## Figures\n<a name=\"here\"></a>\n")
	for _, want := range []string{"a", "figures", "figures-1", "figures-2", "here"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a comment in a code block became an anchor")
	}
}

func TestCheckFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "docs"), 0o755)
	os.WriteFile(filepath.Join(root, "README.md"), []byte(strings.Join([]string{
		"# Front",
		"[ok](docs/a.md) [ok anchor](docs/a.md#the-part) [self](#front) [web](https://example.com/x#y)",
		"[gone](docs/missing.md) [bad anchor](docs/a.md#no-such-part) [bad self](#nowhere)",
		"`[in code](docs/missing.md)`",
		"```",
		"[in a fence](docs/missing.md)",
		"```",
		"[out](../elsewhere.md) ![img](docs/pic.png)",
	}, "\n")), 0o644)
	os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("# A\n## The part\n[back](../README.md#front)\n"), 0o644)
	problems, err := Check(root, []string{"README.md", "docs/a.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Link)
	}
	want := "docs/missing.md docs/a.md#no-such-part #nowhere ../elsewhere.md docs/pic.png"
	if strings.Join(got, " ") != want {
		t.Errorf("broken links found: %q, want %q\n%v", strings.Join(got, " "), want, problems)
	}
}
