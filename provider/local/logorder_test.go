//go:build linux

package local_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
)

// orderScript writes to stdout and stderr in turn, many times: two streams
// copied apart come out in the right order often enough by luck.
const orderScript = `echo one; echo two >&2; echo three; i=0; while [ $i -lt 200 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done`

func orderWant() string {
	var b strings.Builder
	b.WriteString("one\ntwo\nthree\n")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, "out %d\nerr %d\n", i, i)
	}
	return b.String()
}

// TestJobLogKeepsTheOrderOnEveryTransport: in a real sandbox, over its
// exec socket and over SSH, plain and in an image, a job's log has its
// stdout and stderr lines in the order the job wrote them.
func TestJobLogKeepsTheOrderOnEveryTransport(t *testing.T) {
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	p := newGroup(t, t.TempDir(), `{"network":"host"}`)
	id := startOne(t, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	img := executor.ImageJob{Name: ref, Settings: jobroot.Settings{Insecure: []string{host}}}
	for name, ci := range transports(t, ci) {
		t.Run(name, func(t *testing.T) {
			var r executor.Runner
			var out lockedBuffer
			code, err := r.Run(context.Background(), ci, executor.Command{Script: orderScript, Output: &out})
			if err != nil || code != 0 || out.String() != orderWant() {
				t.Fatalf("Run: %d %v; log in order: %v\n%.300s", code, err, out.String() == orderWant(), out.String())
			}
			var imgOut lockedBuffer
			code, err = r.RunInImage(context.Background(), ci, executor.Command{Script: orderScript, Output: &imgOut}, img)
			_, job, _ := strings.Cut(imgOut.String(), "\none\n")
			if err != nil || code != 0 || "one\n"+job != orderWant() {
				t.Fatalf("RunInImage: %d %v; log in order: %v\n%.300s", code, err, "one\n"+job == orderWant(), imgOut.String())
			}
		})
	}
}
