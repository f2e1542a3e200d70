package executor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
)

// OrderScript writes to stdout and stderr in turn; OrderWant is the log
// that keeps the order the script wrote in. Many turns, because two
// streams copied apart come out in the right order often enough by luck.
const OrderScript = `echo one; echo two >&2; echo three; i=0; while [ $i -lt 200 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done`

// orderWant is what OrderScript must log.
func orderWant() string {
	var b strings.Builder
	b.WriteString("one\ntwo\nthree\n")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, "out %d\nerr %d\n", i, i)
	}
	return b.String()
}

// TestRunKeepsTheOrderOfStdoutAndStderrOverSSH: a job's log is the one
// stream the job wrote, stderr lines where they were written.
func TestRunKeepsTheOrderOfStdoutAndStderrOverSSH(t *testing.T) {
	srv := newTestServer(t)
	out := newWatchWriter("")
	code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: OrderScript, Output: out})
	if err != nil || code != 0 {
		t.Fatalf("Run: %d %v", code, err)
	}
	if got := out.String(); got != orderWant() {
		t.Fatalf("log out of order; first difference at byte %d:\n%s", firstDiff(got, orderWant()), got[:min(len(got), 400)])
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestImageJobKeepsTheOrderOfStdoutAndStderr: a job in an image (the
// runner on the instance between the SSH session and the job) logs one
// stream too, after the runner's line about its image.
func TestImageJobKeepsTheOrderOfStdoutAndStderr(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	srv := newTestServer(t)
	img := executor.ImageJob{Name: ref, Settings: jobroot.Settings{CacheDir: t.TempDir(), Insecure: []string{host}}}
	var r executor.Runner
	out := newWatchWriter("")
	code, err := r.RunInImage(context.Background(), srv.connectInfo(), executor.Command{Script: OrderScript, Output: out}, img)
	if err != nil || code != 0 {
		t.Fatalf("RunInImage: %d %v\n%s", code, err, out)
	}
	_, job, _ := strings.Cut(out.String(), "\none\n")
	if got := "one\n" + job; got != orderWant() {
		t.Fatalf("log out of order; first difference at byte %d:\n%s", firstDiff(got, orderWant()), out)
	}
}
