package jobroot

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MaskedProc are the host-wide files and directories of /proc a job has no
// business reading: the kernel command line (cloud images put tokens and
// host paths there) and what container runtimes mask as well (key, timer
// and scheduler lists that name the host's processes, hardware trees).
// Sandboxes and the job roots this package builds mask the same entries.
var MaskedProc = []string{"cmdline", "keys", "timer_list", "sched_debug", "latency_stats", "kcore", "acpi", "asound", "scsi", "sysrq-trigger"}

// MaskProc covers each masked entry of the proc file system at proc that
// exists: files with devNull (a bind of /dev/null), directories with an
// empty read-only tmpfs. Mounted before a less privileged user namespace
// copies them, the masks are locked: a job cannot remove them.
func MaskProc(proc, devNull string) error {
	for _, name := range MaskedProc {
		p := filepath.Join(proc, name)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0")
		} else {
			err = unix.Mount(devNull, p, "", unix.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("mask /proc/%s: %w", name, err)
		}
	}
	return nil
}

// UnmaskProc removes MaskProc's masks from proc in the caller's own mount
// namespace. The kernel lets a user namespace mount a new proc only while
// an existing one is fully visible (no file or non-empty directory covered),
// so a process that builds job roots with a fresh /proc must first drop the
// masks it inherited; the job roots it builds are masked again (MaskProc).
// Entries that are not masks are left alone.
func UnmaskProc(proc string) error {
	for _, name := range MaskedProc {
		err := unix.Unmount(filepath.Join(proc, name), unix.MNT_DETACH)
		if err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("unmask /proc/%s: %w", name, err)
		}
	}
	return nil
}
