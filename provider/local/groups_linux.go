package local

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrSupplementaryGroups is returned by Init when unprivileged berth's user
// has supplementary groups through which its jobs could read host files
// that others cannot.
var ErrSupplementaryGroups = errors.New("berth's user has supplementary groups that jobs would keep")

// groupExposureLimit bounds how many exposed paths an error names.
const groupExposureLimit = 5

// checkGroups refuses, unprivileged, a process whose supplementary groups
// (other than its own gid) open a host path to jobs that is closed to
// others: a sandbox's user namespace cannot drop them (an unprivileged
// user namespace denies setgroups), so every job could use them on what
// it sees. Most accounts have groups (sudo, docker, audio, plugdev) that
// own nothing under the host paths, so it walks the host paths once at
// start and refuses only when a file or directory there is readable or
// searchable through such a group and not by others (or carries an ACL,
// which may name a group): group shadow and /etc/shadow, say. masks are
// hidden from jobs anyway and not walked.
func checkGroups(keep bool, hostPaths, masks []string, log *slog.Logger) error {
	if keep || os.Geteuid() == 0 {
		return nil
	}
	groups, err := os.Getgroups()
	if err != nil {
		return fmt.Errorf("local provider: list supplementary groups: %w", err)
	}
	var extra []int
	for _, g := range groups {
		if g != os.Getgid() && g != os.Getegid() {
			extra = append(extra, g)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	start := time.Now()
	exposed, walked := groupExposed(hostPaths, masks, extra)
	if len(exposed) > 0 {
		return fmt.Errorf("local provider: %w: gids %v open %v to jobs, which others cannot read; "+
			"run berth as a user without those groups (systemd: a dedicated User= with no SupplementaryGroups=; or setpriv --clear-groups), "+
			"leave the directories holding them out of provider_config host_paths, "+
			"or accept the risk with provider_config keep_groups = true", ErrSupplementaryGroups, extra, exposed)
	}
	log.Info("supplementary groups kept by jobs open nothing under the host paths", "gids", extra,
		"walked", walked, "took_ms", time.Since(start).Milliseconds())
	return nil
}

// groupExposed walks hostPaths (not masks) and returns up to
// groupExposureLimit paths that one of groups may read or search and
// others may not, with the number of entries walked.
func groupExposed(hostPaths, masks []string, groups []int) (exposed []string, walked int) {
	for _, h := range hostPaths {
		if fi, err := os.Lstat(h); err != nil || fi.Mode()&os.ModeSymlink != 0 {
			continue // not bound: a symlink is copied as a symlink
		}
		filepath.WalkDir(h, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable with the groups too: nothing to see there
			}
			if d.IsDir() && slices.Contains(masks, p) {
				return fs.SkipDir
			}
			walked++
			info, err := d.Info()
			if err != nil {
				return nil
			}
			st, ok := info.Sys().(*syscall.Stat_t)
			if !ok || !groupOnly(p, info.Mode(), int(st.Gid), groups) {
				return nil
			}
			exposed = append(exposed, p)
			if len(exposed) == groupExposureLimit {
				return fs.SkipAll
			}
			if d.IsDir() {
				return fs.SkipDir // one line for the directory, not one per file in it
			}
			return nil
		})
		if len(exposed) == groupExposureLimit {
			break
		}
	}
	return exposed, walked
}

// groupOnly reports whether path p (mode m, group gid) opens to one of
// groups what it closes to others: read on a file, read or search on a
// directory. A symlink opens nothing itself.
func groupOnly(p string, m fs.FileMode, gid int, groups []int) bool {
	if m&fs.ModeSymlink != 0 {
		return false
	}
	perm := m.Perm()
	want := fs.FileMode(0o040) // group read
	if m.IsDir() {
		want |= 0o010 // group search
	}
	groupBits, otherBits := perm&want, perm&(want>>3)
	if groupBits == 0 || groupBits>>3 == otherBits {
		return false
	}
	if slices.Contains(groups, gid) {
		return true
	}
	// With an ACL the group bits are its mask: a named group entry may be
	// one of ours.
	n, err := unix.Lgetxattr(p, "system.posix_acl_access", nil)
	return err == nil && n > 0
}
