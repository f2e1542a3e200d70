package local

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Config is the provider_config of the local provider; see the package
// documentation for the JSON form and the defaults.
type Config struct {
	// Network is "isolated" (the default, also spelled "auto"): a network
	// namespace with only loopback; or "host" to share the host's network,
	// including every service that listens on the host's loopback.
	Network string `json:"network"`
	// HostPaths are the host directories (or files) shown read-only inside
	// every sandbox. Nothing else of the host is visible.
	HostPaths []string `json:"host_paths"`
	// MemoryMax is written to the instance cgroup's memory.max, e.g. "2G".
	// Empty means no limit.
	MemoryMax string `json:"memory_max"`
	// CPUMax is written to the instance cgroup's cpu.max, e.g. "200000
	// 100000" for two CPUs. Empty means no limit.
	CPUMax string `json:"cpu_max"`
	// PidsMax bounds the number of processes and threads of one instance
	// (cgroup pids.max). Nil means defaultPidsMax where cgroups allow; 0
	// means no limit.
	PidsMax *int `json:"pids_max"`
	// DiskMax bounds what one instance's job may keep in /berth, /tmp and
	// the writable layers of its images and services, which live on the
	// state dir's file system, e.g. "20G"; a job past it is killed with a
	// message saying so. Empty means a quarter of that file system; "0"
	// means no limit.
	DiskMax string `json:"disk_max"`
	// DiskReserve is the free space of the state dir's file system that no
	// job eats into: a job still writing when less is free is killed, so
	// that berth's own state and other tenants keep room. Empty means 5%
	// of the file system, at most 1G; "0" means none.
	DiskReserve string `json:"disk_reserve"`
	// InodesMax bounds the files and directories one instance's job may
	// keep where disk_max counts bytes: a file system runs out of inodes
	// with bytes free, and every job on it then fails. Nil means a quarter
	// of the state dir's file system's inodes; 0 means no limit.
	InodesMax *int64 `json:"inodes_max"`
	// InodesReserve is disk_reserve counted in inodes: a job still making
	// files when fewer are free is killed. Nil means 5% of the file
	// system's inodes, at most 100,000; 0 means none.
	InodesReserve *int64 `json:"inodes_reserve"`
	// KeepGroups lets unprivileged berth run although its user has
	// supplementary groups, which its jobs keep (a user namespace cannot
	// drop them): with /etc shown, group shadow would let a job read
	// /etc/shadow. Without it Init refuses.
	KeepGroups bool `json:"keep_groups"`
	// ImageBuilds lets jobs make bind mounts, change mount propagation and
	// remount binds read-only inside their own mount namespace (and
	// unmount), which `buildah bud --isolation chroot` needs; every other
	// mount operation stays denied (seccomp_linux.go mountRules). Off by
	// default; docs/security-model.md says what it costs.
	ImageBuilds bool `json:"image_builds"`
}

// defaultHostPaths is what a sandbox sees of the host unless host_paths says
// otherwise: programs, libraries and configuration, never /home, /root,
// /var, /srv, /run or /sys.
var defaultHostPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// defaultPidsMax is the pids limit per instance where cgroups allow one:
// plenty for a parallel build, few enough that a fork bomb stays contained.
const defaultPidsMax = 4096

// configKeys names the valid keys for error messages.
const configKeys = "network, host_paths, memory_max, cpu_max, pids_max, disk_max, disk_reserve, inodes_max, inodes_reserve, keep_groups, image_builds"

// parseConfig decodes and checks provider_config, filling in defaults.
func parseConfig(raw []byte) (Config, error) {
	var c Config
	if t := bytes.TrimSpace(raw); len(t) > 0 && string(t) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return c, fmt.Errorf("local provider: bad provider_config: %w (valid keys: %s)", err, configKeys)
		}
	}
	switch c.Network {
	case "", "auto", "isolated":
		c.Network = "isolated"
	case "host":
	default:
		return c, fmt.Errorf("local provider: provider_config network %q is not one of isolated (the default), auto (same as isolated), host", c.Network)
	}
	if c.HostPaths == nil {
		c.HostPaths = append([]string(nil), defaultHostPaths...)
	}
	for i, p := range c.HostPaths {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return c, fmt.Errorf("local provider: provider_config host_paths entry %q must be an absolute path other than /", p)
		}
		c.HostPaths[i] = filepath.Clean(p)
		switch strings.SplitN(c.HostPaths[i], "/", 3)[1] {
		case "proc", "dev", "tmp", "berth":
			return c, fmt.Errorf("local provider: provider_config host_paths entry %q is under /%s, which every sandbox has of its own", p, strings.SplitN(c.HostPaths[i], "/", 3)[1])
		}
	}
	for _, a := range c.HostPaths {
		for _, b := range c.HostPaths {
			if a != b && within(b, a) {
				return c, fmt.Errorf("local provider: provider_config host_paths lists %s inside %s; list only %s", b, a, a)
			}
		}
	}
	if c.DiskMax != "" {
		if _, err := parseSize(c.DiskMax); err != nil {
			return c, fmt.Errorf("local provider: provider_config disk_max: %w", err)
		}
	}
	if c.DiskReserve != "" {
		if _, err := parseSize(c.DiskReserve); err != nil {
			return c, fmt.Errorf("local provider: provider_config disk_reserve: %w", err)
		}
	}
	if c.InodesMax != nil && *c.InodesMax < 0 {
		return c, fmt.Errorf("local provider: provider_config inodes_max %d must be 0 (no limit) or positive", *c.InodesMax)
	}
	if c.InodesReserve != nil && *c.InodesReserve < 0 {
		return c, fmt.Errorf("local provider: provider_config inodes_reserve %d must be 0 (none) or positive", *c.InodesReserve)
	}
	if c.PidsMax != nil && *c.PidsMax < 0 {
		return c, fmt.Errorf("local provider: provider_config pids_max %d must be 0 (no limit) or positive", *c.PidsMax)
	}
	return c, nil
}

// within reports whether path p is dir or lies below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// resolve returns p made absolute with symlinks resolved as far as the path
// exists, so that /var/run/x and /run/x compare equal.
func resolve(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for cur := abs; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		if cur == "/" {
			return abs
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// ErrPrivateVisible is returned by Init when a host path shown to sandboxes
// would expose a path that must stay private and berth cannot hide it.
var ErrPrivateVisible = errors.New("a private path would be visible to jobs")

// privateMasks works out what each sandbox must cover so that no private
// path (berth's state dir, config file, token files) is visible through a
// host path. A private directory is covered itself; a private file by its
// directory (/etc/berth for /etc/berth/berth.toml under /etc), not by a
// cover on the file: an editor or install(1) replaces a file by renaming a
// new one over it, and the kernel drops a mount whose mount point is
// renamed over, so a cover on the file would show the next version of it.
// Sandboxes cover each with an empty read-only tmpfs. A file's directory
// is covered only when it is berth's own (its name says "berth"): covering
// /usr/share for a token kept there would take all of it from jobs. It
// refuses what it cannot hide: a private file directly in a host path or
// in a directory not berth's own, a host path inside a private path, and
// a private path that does not exist yet (created later, it would show).
func privateMasks(hostPaths []string, private []string) ([]string, error) {
	var masks []string
	for _, h := range hostPaths {
		fi, err := os.Lstat(h)
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			continue // not bound at all: a symlink is copied, its target is another host path or nothing
		}
		hr := resolve(h)
		for _, p := range private {
			if p == "" {
				continue
			}
			mask, err := privateMask(h, hr, p)
			if err != nil {
				return nil, fmt.Errorf("local provider: %w: %w", ErrPrivateVisible, err)
			}
			if mask != "" && !containsStr(masks, mask) {
				masks = append(masks, mask)
			}
		}
	}
	return masks, nil
}

// privateMask is the directory to cover so that private path p is not seen
// through host path h (hr: h resolved), "" when p is not under h.
func privateMask(h, hr, p string) (string, error) {
	pr := resolve(p)
	if within(hr, pr) {
		return "", fmt.Errorf("host path %s (provider_config key host_paths) lies inside %s, which holds berth's state, config or a token; set host_paths to a list without %s, or move %s elsewhere", h, p, h, p)
	}
	if !within(pr, hr) {
		return "", nil
	}
	rel, _ := filepath.Rel(hr, pr)
	fi, err := os.Stat(pr)
	switch {
	case err != nil:
		return "", fmt.Errorf("host path %s (provider_config key host_paths) would show %s to every job once it exists, and berth hides only what exists at start; create it before starting berth, or move it out of %s", h, p, h)
	case fi.IsDir():
		return filepath.Join(h, rel), nil
	}
	dir := filepath.Dir(rel)
	if dir == "." || !strings.Contains(filepath.Base(dir), "berth") {
		return "", fmt.Errorf("host path %s (provider_config key host_paths) would show %s to every job, and berth hides a private file by covering its directory only when that directory is berth's own (its name says berth); move %s into a directory such as %s, or set host_paths to a list without %s", h, p, p, filepath.Join(h, "berth")+"/", h)
	}
	return filepath.Join(h, dir), nil
}

// idRange is a range of host IDs that sandbox IDs 0..Size-1 map to.
type idRange struct {
	Base, Size int
}

// defaultSubID is the subordinate ID range used as root when /etc/subuid
// and /etc/subgid have no "berth" entry: 65536 IDs starting just above the
// range systemd reserves for containers (524288–1879048191), which no
// regular user or rootless container owns.
var defaultSubID = idRange{Base: 1879048192, Size: 65536}

// subIDUser is the user whose /etc/subuid and /etc/subgid entries, when
// present, give the ranges sandboxes use as root.
const subIDUser = "berth"

// subIDs returns the uid and gid ranges for sandboxes started by root.
func subIDs() (uid, gid idRange) {
	return subIDFrom("/etc/subuid"), subIDFrom("/etc/subgid")
}

func subIDFrom(file string) idRange {
	f, err := os.Open(file)
	if err != nil {
		return defaultSubID
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(parts) != 3 || parts[0] != subIDUser {
			continue
		}
		base, err1 := strconv.Atoi(parts[1])
		size, err2 := strconv.Atoi(parts[2])
		if err1 == nil && err2 == nil && base > 0 && size > 0 {
			return idRange{Base: base, Size: min(size, 65536)}
		}
	}
	return defaultSubID
}
