package gitlab

import (
	"os"
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// A masked value written in two pieces is still masked in GitLab's log, as
// are values a script prints and the job token.
func TestMaskingAcrossWrites(t *testing.T) {
	const secret = "s3cr3t-Value-42"
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{
		Script: []string{`echo "env: $MY_SECRET"`, `echo "token: $CI_JOB_TOKEN"`},
		Variables: append([]gitlabfake.Variable{
			{Key: "MY_SECRET", Value: secret, Masked: true},
		}, noGit...),
	})
	s := newTestSource(t, f, nil)
	j := takeJob(t, s)
	log := j.Log()
	_, _ = log.Write([]byte("split: s3cr3t-"))
	_, _ = log.Write([]byte("Value-42 done\n"))
	_, _ = log.Write([]byte("almost: s3cr3t-Value-4")) // a prefix that never completes
	_, _ = log.Write([]byte("3\n"))
	r := driver{t: t}.run(j)
	if r.err != nil {
		t.Fatal(r.err)
	}
	trace := f.Job(id).Trace()
	if strings.Contains(trace, secret) || strings.Contains(trace, f.Job(id).Token()) {
		t.Fatalf("secret leaked into GitLab's log:\n%s", trace)
	}
	for _, want := range []string{
		"split: [MASKED] done\n",
		"almost: s3cr3t-Value-43\n",
		"env: [MASKED]\n",
		"token: [MASKED]\n",
	} {
		if !strings.Contains(trace, want) {
			t.Errorf("trace lacks %q:\n%s", want, trace)
		}
	}
}

func TestMaskerEverySplit(t *testing.T) {
	const in = "a secret, a secret-longer one and secrets"
	want := "a [MASKED], a [MASKED] one and [MASKED]s"
	for i := 0; i <= len(in); i++ {
		for k := i; k <= len(in); k++ {
			m := newMasker([]string{"secret", "secret-longer", ""}, nil)
			got := string(m.write([]byte(in[:i]))) + string(m.write([]byte(in[i:k]))) +
				string(m.write([]byte(in[k:]))) + string(m.flush())
			if got != want {
				t.Fatalf("split at %d,%d: got %q, want %q", i, k, got, want)
			}
		}
	}
}

// Tokens are masked by their prefix whatever the split, as gitlab-runner's
// token sanitizer does: glpat- always, and the prefixes GitLab sends in
// features.token_mask_prefixes; the prefix stays, the rest goes, and a
// prefix with nothing after it is left alone.
func TestTokenPrefixesMaskedEverySplit(t *testing.T) {
	const in = "pat glpat-Ab_c.d=9 and mytoken:xyz-1, glpat- alone, glpat\n end glpat-tail"
	want := "pat glpat-[MASKED] and mytoken:[MASKED], glpat- alone, glpat\n end glpat-[MASKED]"
	for i := 0; i <= len(in); i++ {
		for k := i; k <= len(in); k++ {
			m := newMasker(nil, []string{"mytoken:", "glpat-"})
			got := string(m.write([]byte(in[:i]))) + string(m.write([]byte(in[i:k]))) +
				string(m.write([]byte(in[k:]))) + string(m.flush())
			if got != want {
				t.Fatalf("split at %d,%d: got %q, want %q", i, k, got, want)
			}
		}
	}
}

// A file variable becomes a file whose path is the variable's value; its
// content is expanded as gitlab-runner does (raw ones: variables_test.go).
func TestFileVariable(t *testing.T) {
	content := "line one\nit's $$NOT_EXPANDED\n"
	want := "line one\nit's $NOT_EXPANDED\n"
	out := t.TempDir() + "/copy"
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{
		Script: []string{`test -f "$MY_FILE"`, `cat "$MY_FILE"`, `cp "$MY_FILE" "$OUT"`},
		Variables: append([]gitlabfake.Variable{
			{Key: "MY_FILE", Value: content, File: true},
			{Key: "OUT", Value: out},
		}, noGit...),
	})
	s := newTestSource(t, f, nil)
	r := driver{t: t}.run(takeJob(t, s))
	if r.err != nil || r.result.Failure != jobsource.FailureNone {
		t.Fatalf("job failed: %v %+v\n%s", r.err, r.result, r.output)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("file variable content = %q, want %q", got, want)
	}
	if !strings.Contains(f.Job(id).Trace(), "it's $NOT_EXPANDED\n") {
		t.Errorf("trace lacks the file's content:\n%s", f.Job(id).Trace())
	}
}

func TestShellQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", `"$HOME" ` + "`id`", "new\nline", `\'`} {
		var got strings.Builder
		d := driver{t: t}
		exit, _ := d.sh("printf %s "+shellQuote(s), t.TempDir(), func(p []byte) (int, error) { return got.Write(p) }, nil, nil)
		if exit != 0 || got.String() != s {
			t.Errorf("shellQuote(%q) round-trips to %q (exit %d)", s, got.String(), exit)
		}
	}
}
