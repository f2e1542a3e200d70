package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/jobroot"
)

// stagingDirs are host directories, in order of preference, on which the
// sandbox mounts the tmpfs that becomes its root. The mount stays inside the
// sandbox's own mount namespace; any path the sandbox's user can reach will
// do, because the instance directory itself may not be reachable by that
// user (as root, sandboxes run as a subordinate uid).
var stagingDirs = []string{"/tmp", "/mnt", "/media", "/srv", "/run", "/var/tmp"}

// shmSize bounds the private /dev/shm of a sandbox.
const shmSize = "64m"

// devNodes are bound from the host's /dev into the sandbox's own; these are
// the harmless ones every program expects.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// setupRoot builds the sandbox's root file system on a small tmpfs and
// pivots into it:
//   - each host path of cfg.HostPaths is bound recursively and read-only
//     (symlinks such as /bin -> usr/bin are copied as symlinks);
//   - /berth and /tmp are the instance's own writable directories, passed in
//     as descriptors;
//   - /dev is a fresh tmpfs with a few harmless host device nodes, a new
//     devpts instance and a private /dev/shm;
//   - directories in host paths that hold berth's private files are covered
//     by an empty read-only tmpfs (maskPrivate);
//   - /proc is a new procfs for the PID namespace.
//
// Nothing else of the host is visible. The mounts are locked later, when
// commands start in a nested user and mount namespace.
func setupRoot(cfg sandboxConfig) error {
	// Nothing we mount may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// Unprivileged, the instance directories are reachable by path; open
	// them now, before the staging mount may cover them (tests keep state
	// under /tmp), so that they are bound from this mount namespace.
	if !cfg.DetachedMounts {
		for _, d := range []struct {
			fd   int
			name string
		}{{diskFD, diskDir}, {tmpFD, tmpDir}} {
			fd, err := unix.Open(filepath.Join(cfg.Dir, d.name), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open instance %s: %w", d.name, err)
			}
			if err := unix.Dup3(fd, d.fd, unix.O_CLOEXEC); err != nil {
				return err
			}
			unix.Close(fd)
		}
		if err := cloneImagesDir(cfg); err != nil {
			return err
		}
	}
	root := ""
	for _, d := range stagingDirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			root = d
			break
		}
	}
	if root == "" {
		return fmt.Errorf("no directory to build the sandbox root on (tried %v)", stagingDirs)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mount root tmpfs on %s: %w", root, err)
	}
	// The second, empty, lower layer of the host paths' overlays; removed
	// once they are mounted (the overlays keep it).
	empty := filepath.Join(root, ".empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		return err
	}
	var readOnly []string
	for _, src := range cfg.HostPaths {
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		dst := filepath.Join(root, src)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
			continue
		case fi.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
		default:
			if err := os.WriteFile(dst, nil, 0o644); err != nil {
				return err
			}
		}
		if fi.IsDir() {
			if err := mountHostDir(src, dst, empty, cfg.Network == "isolated"); err != nil {
				return err
			}
		} else if err := bindHost(src, dst); err != nil {
			return err
		}
		readOnly = append(readOnly, dst)
	}
	if err := os.Remove(empty); err != nil {
		return err
	}
	if err := maskPrivate(root, cfg.Masks); err != nil {
		return err
	}
	own := []struct {
		fd   int
		name string
		mode os.FileMode
	}{{diskFD, "berth", 0o755}, {tmpFD, "tmp", os.ModeSticky | 0o777}}
	for _, b := range own {
		dst := filepath.Join(root, b.name)
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if cfg.DetachedMounts {
			if err := unix.MoveMount(b.fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return fmt.Errorf("mount instance %s: %w", b.name, err)
			}
		} else if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", b.fd), dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind instance %s: %w", b.name, err)
		}
		if err := os.Chmod(dst, b.mode); err != nil {
			return err
		}
		unix.Close(b.fd)
	}
	if err := setupDev(filepath.Join(root, "dev")); err != nil {
		return err
	}
	for _, dst := range readOnly {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE, &attr); err != nil {
			return fmt.Errorf("make %s read-only: %w", dst, err)
		}
	}
	proc := filepath.Join(root, "proc")
	if err := os.Mkdir(proc, 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	// Before any job can start, and through this procfs (quotas_linux.go).
	if err := setUserQuotas(filepath.Join(proc, "sys", "user"), cfg.Slots); err != nil {
		return err
	}
	if err := jobroot.MaskProc(proc, filepath.Join(root, "dev", "null")); err != nil {
		return err
	}
	// Every host mount not bound above goes with the old root.
	if err := jobroot.PivotRoot(root); err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &attr); err != nil {
		return fmt.Errorf("make / read-only: %w", err)
	}
	return nil
}

// maskPrivate covers each directory of masks (paths as the host and the
// sandbox both name them) with an empty read-only tmpfs, before the
// mounts are locked: a job cannot unmount it, and binding the host path
// without its submounts is refused by the kernel for locked mounts.
func maskPrivate(root string, masks []string) error {
	for _, m := range masks {
		dst := filepath.Join(root, m)
		if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=4k"); err != nil {
			return fmt.Errorf("hide %s from jobs: %w", m, err)
		}
	}
	return nil
}

// setupDev makes the sandbox's /dev: a read-only tmpfs holding the host's
// null, zero, full, random, urandom and tty nodes (bound, because a user
// namespace may not create device nodes), a devpts of its own with ptmx,
// a private /dev/shm and the usual fd symlinks. No other host device is
// reachable.
func setupDev(dev string) error {
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev tmpfs: %w", err)
	}
	for _, n := range devNodes {
		dst := filepath.Join(dev, n)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	pts := filepath.Join(dev, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount devpts: %w", err)
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size="+shmSize); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	links := map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	// The tmpfs itself becomes read-only so that a job cannot leave files
	// in /dev for the next one; pts and shm are separate mounts.
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, dev, 0, &attr); err != nil {
		return fmt.Errorf("make /dev read-only: %w", err)
	}
	return nil
}

// wipeDir removes everything inside dir but not dir itself, coping with
// directories a job made unwritable.
func wipeDir(dir string) error {
	if err := clearXattrs(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if err := removeAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// clearXattrs removes every extended attribute of dir itself, POSIX ACLs
// (system.posix_acl_access, system.posix_acl_default) included: a default
// ACL a job put on /tmp would otherwise be inherited by the next job's
// files, and user.* attributes would carry data from one job to the next.
func clearXattrs(dir string) error {
	size, err := unix.Llistxattr(dir, nil)
	if err != nil || size == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return err
	}
	buf := make([]byte, size)
	if size, err = unix.Llistxattr(dir, buf); err != nil {
		return err
	}
	var errs []error
	for _, name := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if err := unix.Lremovexattr(dir, name); err != nil && !errors.Is(err, unix.ENODATA) {
			errs = append(errs, fmt.Errorf("remove extended attribute %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
