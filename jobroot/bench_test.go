//go:build linux

package jobroot_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/jobroot"
)

// BenchmarkWarmRun runs `true` in a cached image through the runner
// directly (no SSH): the cost of a fresh root per job.
func BenchmarkWarmRun(b *testing.B) {
	ref, host := push(b, "busybox:1", testImage(b, ""))
	spec := jobroot.Spec{Image: ref, Settings: settings(b, host)}
	runJob(b, spec, "true")
	for b.Loop() {
		if code, out, err := runJob(b, spec, "true"); err != nil || code != 0 {
			b.Fatalf("exit %d, %v\n%s", code, err, out)
		}
	}
}

// BenchmarkJobDisk reports the disk a job that writes nothing takes in its
// upper directory while it runs (the files the runner writes: /etc/hosts,
// /etc/hostname, /etc/resolv.conf and mount points).
func BenchmarkJobDisk(b *testing.B) {
	ref, host := push(b, "busybox:1", testImage(b, ""))
	spec := jobroot.Spec{Image: ref, Settings: settings(b, host)}
	var disk int64
	for b.Loop() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runJob(b, spec, "touch /.marker; sleep 0.3")
		}()
		var upper string
		for upper == "" {
			m, _ := filepath.Glob(filepath.Join(spec.Settings.CacheDir, "jobs", "job-*", "upper", ".marker"))
			if len(m) == 1 {
				upper = filepath.Dir(m[0])
			}
			time.Sleep(5 * time.Millisecond)
		}
		disk = du(upper)
		<-done
	}
	b.ReportMetric(float64(disk)/1e3, "disk-kB/job")
}

func du(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
