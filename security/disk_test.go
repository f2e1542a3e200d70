//go:build linux

package security_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDiskMaxStopsAJobFillingTheDisk has a job write past its instance's
// disk_max (the state dir's disk is shared by every instance and by
// berth's own state) and checks that the job is killed with a message
// saying why, its files are gone at once, and the instance takes the next
// job.
func TestDiskMaxStopsAJobFillingTheDisk(t *testing.T) {
	f := newFixture(t, `{"disk_max": "64M"}`)
	code, out := f.job(f.a, "head -c 300M /dev/zero > /berth/big; sleep 10; echo survived")
	if code == 0 || strings.Contains(out, "survived") {
		t.Fatalf("a job wrote 300M past disk_max 64M and went on: exit %d %q", code, out)
	}
	if !strings.Contains(out, "over this instance's 64.0 MiB limit (provider_config disk_max)") {
		t.Errorf("the job's output does not say why it was killed: %q", out)
	}
	var used int64
	filepath.Walk(filepath.Join(f.instDir(f.a), "disk"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			used += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	if used > 64<<20 {
		t.Errorf("the killed job's files still take %d bytes on the host", used)
	}
	f.recycle(f.a)
	if code, out := f.job(f.a, "echo next"); code != 0 || out != "next\n" {
		t.Fatalf("the instance does not take the next job: exit %d %q", code, out)
	}
}
