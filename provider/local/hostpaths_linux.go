package local

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// mountHostDir shows host directory src at dst, read-only later.
//
// With network = "isolated" it is a read-only overlay with src as its only
// real layer, not a bind mount. A bind mount shows the host's own inodes,
// so a job could connect() to any unix socket under src that its uid may
// write (a read-only mount does not stop that) and watch src's files with
// inotify to see when other tenants use them. An overlay has inodes of its
// own: the kernel finds no socket behind them (connect fails with
// ECONNREFUSED), and inotify on them sees only this sandbox's accesses.
// Mounts below src (a container's /etc/hosts, say) are shown the same way
// on top. Where the kernel refuses an overlay in a user namespace (before
// Linux 5.11), or src's name cannot be written in overlay options, the
// directory is bound as before, and a warning says so.
//
// empty is an empty directory: an overlay without an upper layer needs two
// lower ones.
func mountHostDir(src, dst, empty string, isolated bool) error {
	if !isolated {
		return bindHost(src, dst)
	}
	if err := overlayDir(src, dst, empty); err != nil {
		slog.Warn("host path bound instead of overlaid: jobs can connect to unix sockets under it and watch its files", "path", src, "err", err)
		return bindHost(src, dst)
	}
	subs, err := submounts(src)
	if err != nil {
		return err
	}
	for _, sub := range subs {
		target := filepath.Join(dst, strings.TrimPrefix(sub, src))
		fi, err := os.Stat(sub)
		if err != nil {
			continue // gone, or hidden under another mount
		}
		if !fi.IsDir() || overlayDir(sub, target, empty) != nil {
			if err := unix.Mount(sub, target, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind %s: %w", sub, err)
			}
		}
	}
	return nil
}

func bindHost(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}

// overlayDir mounts a read-only overlay of dir at dst.
func overlayDir(dir, dst, empty string) error {
	if strings.ContainsAny(dir, ":,\\") {
		return fmt.Errorf("%q holds a character overlay options cannot carry", dir)
	}
	if err := unix.Mount("overlay", dst, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "lowerdir="+dir+":"+empty); err != nil {
		return fmt.Errorf("overlay %s: %w", dir, err)
	}
	return nil
}

// submounts lists the mount points strictly below dir in this mount
// namespace, parents first.
func submounts(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var subs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp != dir && within(mp, dir) && !containsStr(subs, mp) {
			subs = append(subs, mp)
		}
	}
	sort.Slice(subs, func(i, j int) bool { return strings.Count(subs[i], "/") < strings.Count(subs[j], "/") })
	return subs, sc.Err()
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
