//go:build linux

package local_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/images"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
)

// TestImageJobPastDiskMaxIsKilled: a job in an image writes into its
// root (the overlay's upper dir, on the state dir's file system) past
// disk_max. It is killed with the reason, its writable layer is gone from
// the host, and the instance runs the next image job.
func TestImageJobPastDiskMaxIsKilled(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "mb", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20})
	tw.Write(make([]byte, 1<<20))
	tw.Close()
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:mb", imagetest.Busybox(t, "", imagetest.FromTar(t, buf.Bytes())))
	p := newGroup(t, t.TempDir(), `{"disk_max": "64M"}`)
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
	im, err := cache.Get(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Release()
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var r executor.Runner
	job := executor.ImageJob{Name: ref, Settings: jobroot.Settings{PullPolicy: "never"}}
	var out logBuf
	code, _ := r.RunInImage(context.Background(), ci, executor.Command{Output: &out,
		Script: `for i in $(seq 1 300); do cat /mb >> /big; done; sleep 10; echo survived`}, job)
	if code == 0 || strings.Contains(out.String(), "survived") {
		t.Fatalf("an image job wrote 300M past disk_max 64M and went on: exit %d\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "over this instance's 64.0 MiB limit (provider_config disk_max)") {
		t.Errorf("the job's output does not say why it was killed:\n%s", out.String())
	}
	jobs := filepath.Join(where.Dir, "..", "jobs")
	if used := du(jobs); used > 64<<20 {
		t.Errorf("the killed job's writable layer still takes %d bytes in %s", used, jobs)
	}
	out.Reset()
	if code, err := r.RunInImage(context.Background(), ci, executor.Command{Output: &out, Script: "echo next"}, job); err != nil || code != 0 || !strings.Contains(out.String(), "next") {
		t.Fatalf("the instance does not run the next image job: exit %d, %v\n%s", code, err, out.String())
	}
}

// du is the space the files under dir take.
func du(dir string) int64 {
	var used int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			used += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return used
}

// TestInitSweepsHalfUnpackedLayers: berth killed mid-pull leaves a half
// layer in an instance's image cache; the next start removes it without
// waiting for the next pull on that instance.
func TestInitSweepsHalfUnpackedLayers(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	where, err := p.ImageCache(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := images.Open(images.Config{Dir: where.Dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(where.Dir, "lock"), nil, 0o600)
	half := filepath.Join(where.Dir, "tmp", "layer-42")
	if err := os.MkdirAll(filepath.Join(half, "usr"), 0o755); err != nil {
		t.Fatal(err)
	}
	newGroup(t, dir, "") // the restart
	if _, err := os.Lstat(half); !os.IsNotExist(err) {
		t.Fatalf("the half-unpacked layer survived the restart: %v", err)
	}
}
