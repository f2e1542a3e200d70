//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
)

// TestImageLauncherStartsForTheFirstImageJob: a sandbox starts its image
// launcher only for its first image job. Until then PID 1 carries the
// seccomp filter on the one thread that starts jobs, so plain jobs are as
// restricted as ever; the image job then works, and afterwards every thread
// of PID 1 is filtered too.
func TestImageLauncherStartsForTheFirstImageJob(t *testing.T) {
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	dir := t.TempDir()
	p := newGroup(t, dir, `{"network":"host"}`)
	id := startOne(t, p)
	pid1 := readMeta(t, dir, id).PID

	plainJobIsFiltered := func(when string) {
		t.Helper()
		res := run(t, p, id, `grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; mkdir -p /tmp/m; mount -t tmpfs none /tmp/m && echo MOUNTED; unshare -m true && echo UNSHARED; true`)
		out := res.Stdout + res.Stderr
		for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2", "not permitted"} {
			if !strings.Contains(out, want) {
				t.Errorf("plain job %s: output lacks %q:\n%s", when, want, out)
			}
		}
		if strings.Contains(out, "MOUNTED") {
			t.Errorf("plain job %s could mount:\n%s", when, out)
		}
	}

	plainJobIsFiltered("before any image job")
	if kids := children(t, pid1); len(kids) != 0 {
		t.Errorf("PID 1 of a sandbox that ran no image job has children %v, want none (no image launcher)", kids)
	}
	modes := threadSeccomp(t, pid1)
	if filtered := count(modes, "2"); filtered != 1 || count(modes, "0") != len(modes)-1 {
		t.Errorf("PID 1's threads before any image job: seccomp modes %v, want exactly one filtered (the job thread)", modes)
	}

	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	// Two image jobs at once, one per transport: one launcher starts.
	var wg sync.WaitGroup
	for name, ci := range transports(t, ci) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r executor.Runner
			var out logBuf
			code, err := r.RunInImage(context.Background(), ci, executor.Command{Output: &out,
				Script: `cat /etc/os-release; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status`},
				executor.ImageJob{Name: ref, Settings: jobroot.Settings{Insecure: []string{host}}})
			if err != nil || code != 0 {
				t.Errorf("image job over %s after a plain one: exit %d, %v\n%s", name, code, err, out.String())
				return
			}
			for _, want := range []string{"NAME=berth-test-image", "NoNewPrivs:\t1", "Seccomp:\t2"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("image job over %s: output lacks %q:\n%s", name, want, out.String())
				}
			}
		}()
	}
	wg.Wait()

	launchers := 0
	for _, kid := range children(t, pid1) {
		if b, _ := os.ReadFile("/proc/" + kid + "/cmdline"); strings.HasPrefix(string(b), "berth-launcher\x00") {
			launchers++
		}
	}
	if launchers != 1 {
		t.Errorf("PID 1 has %d image launchers after two image jobs at once, want 1", launchers)
	}
	for tid, mode := range threadSeccomp(t, pid1) {
		if mode != "2" {
			t.Errorf("PID 1's thread %s after an image job: seccomp mode %s, want 2 (sealed)", tid, mode)
		}
	}
	// The sandbox's filter with the seal's allow-all one on top.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid1)); err != nil || !strings.Contains(string(b), "Seccomp_filters:\t2\n") {
		t.Errorf("PID 1 after an image job: want Seccomp_filters 2 in its status (%v):\n%s", err, b)
	}
	plainJobIsFiltered("after an image job")
}

// children lists the live child processes of pid (every thread's).
func children(t *testing.T, pid int) []string {
	t.Helper()
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(files) == 0 {
		t.Fatalf("no threads for PID %d: %v", pid, err)
	}
	var kids []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

// threadSeccomp maps each thread of pid to its Seccomp mode in
// /proc/PID/task/TID/status (0 none, 2 filter).
func threadSeccomp(t *testing.T, pid int) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	modes := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
				modes[filepath.Base(filepath.Dir(f))] = strings.TrimSpace(v)
			}
		}
	}
	if len(modes) == 0 {
		t.Fatalf("no thread status for PID %d", pid)
	}
	return modes
}

func count(m map[string]string, v string) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}
