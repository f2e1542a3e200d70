//go:build linux

package local_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/images"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
)

// TestImageCacheFilledOnTheHost: on an isolated instance, images pulled
// on the host into the cache the provider names (as berth's manager does)
// serve a job and its service with pull policy never. As root the files
// belong to the sandbox's root, so the image's own user (builder, 1000)
// runs the job and the service starts from the same cache.
func TestImageCacheFilledOnTheHost(t *testing.T) {
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, "builder"))
	svcRef := imagetest.Push(t, host, "web:1", imagetest.Busybox(t, ""))
	p := newGroup(t, t.TempDir(), "") // isolated: no route to the registry
	id := startOne(t, p)
	where, err := p.ImageCache(id)
	if err != nil {
		t.Fatal(err)
	}
	cfg := images.Config{Dir: where.Dir, Insecure: []string{host}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if where.Chown {
		cfg.Owner = &images.Owner{UID: where.UID, GID: where.GID}
	}
	cache, err := images.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{ref, svcRef} {
		im, err := cache.Get(context.Background(), r, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer im.Release()
	}
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	svc := jobroot.Service{Image: svcRef, Alias: "web", Entrypoint: []string{"sh", "-c"},
		Command: []string{"mkdir -p /www && echo pong > /www/index.html && exec httpd -f -p " + port + " -h /www"}}
	var r executor.Runner
	var out logBuf
	code, err := r.RunInImage(context.Background(), ci, executor.Command{Output: &out, Script: `set -e
cat /etc/os-release; echo uid=$(id -u)
echo mine > /tmp/mine && cat /tmp/mine
for i in $(seq 1 100); do wget -q -O- http://web:` + port + `/ 2>/dev/null && exit 0; sleep 0.05; done; exit 1`},
		executor.ImageJob{Name: ref, Settings: jobroot.Settings{PullPolicy: "never"}, Services: []jobroot.Service{svc}})
	if err != nil || code != 0 {
		t.Fatalf("exit %d err %v:\n%s", code, err, out.String())
	}
	for _, want := range []string{"Using cached image", "NAME=berth-test-image", "mine", "pong"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if where.Chown && !strings.Contains(out.String(), "uid=1000") {
		t.Errorf("the image's user did not run the job:\n%s", out.String())
	}
}
