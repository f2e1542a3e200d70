//go:build linux

package local_test

import (
	"context"
	"testing"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
)

// BenchmarkImageJobWarm is a job in a cached image on a warm local
// instance, from the executor's call to the end of a script that is only
// `true`: SSH, the launcher, the runner, a fresh overlay root and the
// job's namespaces. The script's start is bounded by this.
func BenchmarkImageJobWarm(b *testing.B) {
	host := imagetest.Registry(b)
	ref := imagetest.Push(b, host, "busybox:1", imagetest.Busybox(b, ""))
	p := newGroup(b, b.TempDir(), `{"network":"host"}`)
	id := startOne(b, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		b.Fatal(err)
	}
	img := executor.ImageJob{Name: ref, Settings: jobroot.Settings{Insecure: []string{host}}}
	var r executor.Runner
	job := func() {
		code, err := r.RunInImage(context.Background(), ci, executor.Command{Script: "true"}, img)
		if err != nil || code != 0 {
			b.Fatalf("exit %d, %v", code, err)
		}
	}
	job() // pulls
	for b.Loop() {
		job()
	}
}

// BenchmarkPlainJobWarm is the same job without an image, for comparison.
func BenchmarkPlainJobWarm(b *testing.B) {
	p := newGroup(b, b.TempDir(), `{"network":"host"}`)
	id := startOne(b, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		b.Fatal(err)
	}
	var r executor.Runner
	for b.Loop() {
		if code, err := r.Run(context.Background(), ci, executor.Command{Script: "true"}); err != nil || code != 0 {
			b.Fatalf("exit %d, %v", code, err)
		}
	}
}
