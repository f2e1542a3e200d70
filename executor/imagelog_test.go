package executor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
)

// The job's log shows the pull: "Pulling image X" before the job's own
// output, and when the pull fails, why, so the log is never empty.
func TestImagePullIsInTheJobsLog(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	srv := newTestServer(t)
	set := jobroot.Settings{CacheDir: t.TempDir(), Insecure: []string{host}}
	var r executor.Runner

	out := newWatchWriter("")
	code, err := r.RunInImage(context.Background(), srv.connectInfo(), executor.Command{Script: "echo job-output", Output: out},
		executor.ImageJob{Name: ref, Settings: set})
	if err != nil || code != 0 {
		t.Fatalf("RunInImage: %d %v\n%s", code, err, out)
	}
	log := out.String()
	pulling, pulled, job := strings.Index(log, "Pulling image "+ref+"\n"), strings.Index(log, "Pulled image "+ref), strings.Index(log, "job-output")
	if pulling < 0 || pulled < pulling || job < pulled {
		t.Fatalf("log does not say Pulling, then Pulled, then the job's output:\n%s", log)
	}

	out = newWatchWriter("")
	missing := host + "/missing:1"
	_, err = r.RunInImage(context.Background(), srv.connectInfo(), executor.Command{Script: "true", Output: out},
		executor.ImageJob{Name: missing, Settings: set})
	if _, ok := executor.IsImageError(err); !ok {
		t.Fatalf("missing image: %v, want an ImageError", err)
	}
	if log := out.String(); !strings.Contains(log, "Pulling image "+missing) || !strings.Contains(log, "ERROR: the job could not start: ") ||
		strings.Count(log, missing) < 2 {
		t.Fatalf("the log of a failed pull does not say what failed:\n%s", log)
	}
}
