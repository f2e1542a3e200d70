package executor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
	_ "github.com/berth-ci/berth/provider/local" // the seccomp filter jobs get
)

func TestMain(m *testing.M) {
	jobroot.RunIfRequested()
	os.Exit(m.Run())
}

// TestImageJobOverSSH is the path of a cloud instance: the executor copies
// this binary to an instance reached over SSH (once, checked by SHA-256)
// and runs the job in its image there.
func TestImageJobOverSSH(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	srv := newTestServer(t)
	img := executor.ImageJob{Name: ref, Settings: jobroot.Settings{CacheDir: t.TempDir(), Insecure: []string{host}}}
	var r executor.Runner

	out := newWatchWriter("")
	code, err := r.RunInImage(context.Background(), srv.connectInfo(), executor.Command{
		Script: "cat /etc/os-release; echo \"var=$IMAGE_VAR job=$JOB\"", Env: []string{"JOB=yes"}, Output: out,
	}, img)
	if err != nil || code != 0 {
		t.Fatalf("code %d err %v\n%s", code, err, out)
	}
	for _, want := range []string{"Pulled image", "NAME=berth-test-image", "var=from-image job=yes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	bins, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "berth/bin/berth-*"))
	if len(bins) != 1 {
		t.Fatalf("runner binaries installed: %v", bins)
	}

	out = newWatchWriter("")
	code, err = r.RunInImage(context.Background(), srv.connectInfo(), executor.Command{Script: "exit 4", Output: out}, img)
	if err != nil || code != 4 || !strings.Contains(out.String(), "Using cached image") {
		t.Fatalf("second job: code %d err %v\n%s", code, err, out)
	}

	// The instance lost its copy of the runner (a new disk behind the
	// same ID): it is copied again and the job runs, its log clean.
	os.Remove(bins[0])
	out = newWatchWriter("")
	code, err = r.RunInImage(context.Background(), srv.connectInfo(), executor.Command{Script: "echo again", Output: out}, img)
	if err != nil || code != 0 || !strings.Contains(out.String(), "again") || strings.Contains(out.String(), "not found") {
		t.Fatalf("job after the runner vanished: code %d err %v\n%s", code, err, out)
	}
	// A script's own exit 127 is the job's result, not a missing runner.
	out = newWatchWriter("")
	code, err = r.RunInImage(context.Background(), srv.connectInfo(), executor.Command{Script: "no-such-command", Output: out}, img)
	if err != nil || code != 127 || strings.Count(out.String(), "image") != 1 {
		t.Fatalf("exit 127 of the script: code %d err %v\n%s", code, err, out)
	}

	_, err = r.RunInImage(context.Background(), srv.connectInfo(), executor.Command{Script: "true"},
		executor.ImageJob{Name: host + "/missing:1", Settings: img.Settings})
	var ie *executor.ImageError
	if !errors.As(err, &ie) || ie.Reason != "image_pull_failure" || !strings.Contains(ie.Error(), host+"/missing:1") {
		t.Fatalf("missing image: %v, want an ImageError naming it", err)
	}
}
