//go:build linux

package local_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/internal/sandboxtest"
	"github.com/berth-ci/berth/jobroot"
)

type logBuf struct{ strings.Builder }

// TestImageJobsInASandbox runs jobs in an image on a local instance: the
// sandbox's launcher starts berth's job runner, the job sees the image and
// the instance's /berth, not the host, and the next job, after a recycle,
// gets a fresh root while the image stays cached.
func TestImageJobsInASandbox(t *testing.T) {
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	dir := t.TempDir()
	p := newGroup(t, dir, `{"network":"host"}`) // the runner pulls from the test registry on loopback
	id := startOne(t, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	img := executor.ImageJob{Name: ref, Settings: jobroot.Settings{Insecure: []string{host}}}
	var r executor.Runner
	runIn := func(script string) (int, string) {
		t.Helper()
		var out logBuf
		code, err := r.RunInImage(context.Background(), ci, executor.Command{Script: script, Output: &out}, img)
		if err != nil {
			t.Fatalf("RunInImage: %v\n%s", err, out.String())
		}
		return code, out.String()
	}
	code, out := runIn(`set -e
cat /etc/os-release; pwd; echo "var=$IMAGE_VAR"
echo artifact > /berth/artifact
test ! -e /usr/bin/apt && echo "no host files"
grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status
echo leaked > /etc/leak`)
	if code != 0 {
		t.Fatalf("job exited %d:\n%s", code, out)
	}
	for _, want := range []string{"Pulled image", "NAME=berth-test-image", "/berth\n", "var=from-image", "no host files", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if res := run(t, p, id, "cat /berth/artifact; ls /tmp"); !strings.Contains(res.Stdout, "artifact") || strings.Contains(res.Stdout, "layers") {
		t.Errorf("a plain job sees %q: want the artifact in /berth and no image cache in /tmp", res.Stdout)
	}
	if err := p.Recycle(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	code, out = runIn(`test ! -e /etc/leak && echo fresh`)
	if code != 0 || !strings.Contains(out, "fresh") || !strings.Contains(out, "Using cached image") {
		t.Fatalf("second job after recycle: exit %d:\n%s", code, out)
	}
}

// TestImageJobOnIsolatedInstanceSaysWhy: an isolated sandbox has no route
// to a registry; the job fails naming the image and what to change.
func TestImageJobOnIsolatedInstanceSaysWhy(t *testing.T) {
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	p := newGroup(t, t.TempDir(), "")
	id := startOne(t, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var r executor.Runner
	_, err = r.RunInImage(context.Background(), ci, executor.Command{Script: "true"},
		executor.ImageJob{Name: ref, Settings: jobroot.Settings{Insecure: []string{host}}})
	ie, ok := executor.IsImageError(err)
	if !ok || ie.Reason != "image_pull_failure" || !strings.Contains(ie.Message, ref) || !strings.Contains(ie.Message, `network = "host"`) {
		t.Fatalf("err = %v, want an image_pull_failure naming %s and the network setting", err, ref)
	}
}

// TestImageJobsUnprivileged runs the image tests again with berth as
// nobody: the sandbox maps one ID, the launcher binds the cache by path.
func TestImageJobsUnprivileged(t *testing.T) {
	sandboxtest.RerunAsNobody(t, "BERTH_LOCAL_IMAGE_TEST_UNPRIVILEGED", nil, "-test.run",
		"^(TestImageJobsInASandbox|TestServiceInASandbox|TestImageCacheFilledOnTheHost|TestImageLauncherStartsForTheFirstImageJob|TestImageJobPastDiskMaxIsKilled|TestImageJobsUnprivileged)$")
}

// TestServiceInASandbox reaches a service by alias on a local instance.
func TestServiceInASandbox(t *testing.T) {
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	p := newGroup(t, t.TempDir(), `{"network":"host"}`)
	id := startOne(t, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	svc := jobroot.Service{Image: ref, Alias: "web", Entrypoint: []string{"sh", "-c"},
		Command: []string{"mkdir -p /www && echo pong > /www/index.html && exec httpd -f -p " + port + " -h /www"}}
	var r executor.Runner
	var out logBuf
	code, err := r.RunInImage(context.Background(), ci, executor.Command{Output: &out,
		Script: `for i in $(seq 1 100); do wget -q -O- http://web:` + port + `/ 2>/dev/null && exit 0; sleep 0.05; done; exit 1`},
		executor.ImageJob{Name: ref, Settings: jobroot.Settings{Insecure: []string{host}}, Services: []jobroot.Service{svc}})
	if err != nil || code != 0 || !strings.Contains(out.String(), "pong") {
		t.Fatalf("exit %d err %v, want pong from the service:\n%s", code, err, out.String())
	}
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
