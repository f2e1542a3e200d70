//go:build linux

package security_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-ci/berth/images"
)

// imageBuildsConfig is the provider_config of the image_builds attacks.
const imageBuildsConfig = `{"image_builds": true}`

// imageBuildsAttacks are what a job could try with the mount calls
// image_builds allows: binds, propagation changes, read-only bind
// remounts and unmounting, in its own mount namespace. Each must fail.
func (f *fixture) imageBuildsAttacks() []attack {
	aDisk := filepath.Join(f.instDir(f.a), "disk")
	return []attack{
		// /proc's masks are locked (mounted before the job's user
		// namespace copied them): a bind without MS_REC would leave them
		// behind, so the kernel refuses it; one with MS_REC takes them
		// along; unmounting them is refused.
		{"bind /proc without its masks to read the kernel command line",
			"mkdir /tmp/p && /berth/attack mount /proc /tmp/p - bind", "blocked: invalid argument"},
		{"bind /proc with its masks and read what they cover",
			"mkdir /tmp/p && " + setUp("/proc /tmp/p - bind,rec") + " && test -s /tmp/p/cmdline && echo WORKED; cat /tmp/p/cmdline; exit 1", "^$"},
		{"unmount a /proc mask", "/berth/attack unmount /proc/cmdline", "blocked: invalid argument"},
		{"bind the unmasked /proc of PID 1's root", "mkdir /tmp/r && /berth/attack mount /proc/1/root/proc /tmp/r - bind", "blocked: permission denied"},
		// Read-only host paths stay read-only.
		{"remount a host path read-write", "/berth/attack mount none /usr - remount,bind", "blocked: operation not permitted"},
		{"remount a host path read-write, nosuid", "/berth/attack mount none /usr - remount,bind,nosuid", "blocked: operation not permitted"},
		{"remount a host path's file system read-write", "/berth/attack mount none /usr - remount", "blocked: operation not permitted"},
		{"bind a host path elsewhere and remount the bind read-write",
			"mkdir /tmp/u && " + setUp("/usr /tmp/u - bind,rec") + " && /berth/attack mount none /tmp/u - remount,bind", "blocked: operation not permitted"},
		{"bind a host path elsewhere and write through the bind",
			"mkdir /tmp/u && " + setUp("/usr /tmp/u - bind,rec") + " && echo pwned > /tmp/u/berth-pwned", "Read-only file system"},
		{"unmount a host path to uncover the host", "/berth/attack unmount /usr", "blocked: invalid argument"},
		{"unmount the root", "/berth/attack unmount /", "blocked: invalid argument"},
		// Nothing of another tenant is reachable to bind.
		{"bind another sandbox's disk", "mkdir /tmp/o && /berth/attack mount " + aDisk + " /tmp/o - bind,rec", "blocked: no such file or directory"},
		{"bind the host's root through PID 1", "mkdir /tmp/r && /berth/attack mount /proc/1/root /tmp/r - bind,rec", "blocked: permission denied"},
		{"bind the host's cgroups", "mkdir /tmp/c && /berth/attack mount /sys/fs/cgroup /tmp/c - bind,rec", "blocked: no such file or directory"},
		// Every mount that is not a bind or propagation change stays
		// refused, whatever its type.
		{"mount a tmpfs", "mkdir /tmp/t && /berth/attack mount tmpfs /tmp/t tmpfs none", "blocked: operation not permitted"},
		{"mount an overlay", "mkdir -p /tmp/o/l /tmp/o/u /tmp/o/w /tmp/o/m && /berth/attack mount overlay /tmp/o/m overlay none", "blocked: operation not permitted"},
		{"mount a tmpfs with mount(8)", "mkdir /tmp/t && mount -t tmpfs none /tmp/t", "(?i)permission denied|not permitted"},
		{"mount a tmpfs behind the magic that strips MS_PRIVATE", "mkdir /tmp/t && /berth/attack mount tmpfs /tmp/t tmpfs magic,private", "blocked: operation not permitted"},
		{"mount a new proc", "mkdir /tmp/p && /berth/attack mount proc /tmp/p proc none", "blocked: operation not permitted"},
		{"mount sysfs", "/berth/attack mount sysfs /sys sysfs none", "blocked: operation not permitted"},
		{"move a mount", "mkdir /tmp/m && /berth/attack mount /usr /tmp/m - move", "blocked: operation not permitted"},
		{"clone a mount with open_tree", "/berth/attack open_tree", "blocked: operation not permitted"},
		{"clear read-only with mount_setattr", "/berth/attack mount_setattr", "blocked: operation not permitted"},
		{"pivot_root", "cd /tmp && mkdir -p n/old && " + setUp("/tmp/n /tmp/n - bind") + " && pivot_root /tmp/n /tmp/n/old", "(?i)not permitted"},
	}
}

// setUp is a mount an attack makes first, which must work (its WORKED is
// not the attack's).
func setUp(args string) string { return "/berth/attack mount " + args + " >/dev/null" }

// TestImageBuildsAttacks runs the attacks above, and every attack of the
// default suite, from a job on sandbox B with image_builds on while
// sandbox A holds a secret on its disk.
func TestImageBuildsAttacks(t *testing.T) {
	f := newFixture(t, imageBuildsConfig)
	if code, out := f.job(f.a, "echo "+secret+" > /berth/secret"); code != 0 {
		t.Fatalf("job on A: %d %s", code, out)
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	attacks := f.imageBuildsAttacks()
	for _, a := range f.attacks() {
		if a.name == "unmount to uncover the host" {
			a.blocked = "blocked: invalid argument" // the mount is locked; seccomp lets umount2 through now
		}
		attacks = append(attacks, a)
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			code, out := f.job(f.b, a.script)
			if code == 0 || strings.Contains(out, "WORKED") || strings.Contains(out, secret) ||
				(len(strings.TrimSpace(string(cmdline))) > 8 && strings.Contains(out, strings.TrimSpace(string(cmdline)))) {
				t.Fatalf("attack worked (exit %d):\n%s", code, out)
			}
			if !regexp.MustCompile(a.blocked).MatchString(out) {
				t.Errorf("attack failed, but not for the expected reason %q:\n%s", a.blocked, out)
			}
		})
		f.recycle(f.b)
	}
	if _, err := os.Stat("/usr/berth-pwned"); err == nil {
		os.Remove("/usr/berth-pwned")
		t.Errorf("a job wrote /usr/berth-pwned on the host")
	}
}

// TestImageBuildsMountFlood has a job make mounts until the kernel says
// no: the per-namespace mount limit (fs.mount-max) ends it, the sandbox
// keeps serving jobs, and the next job starts with none of them.
func TestImageBuildsMountFlood(t *testing.T) {
	f := newFixture(t, imageBuildsConfig)
	b, err := os.ReadFile("/proc/sys/fs/mount-max")
	must(t, err)
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	code, out := f.job(f.a, "mkdir /tmp/f && /berth/attack mountflood /tmp/f "+strconv.Itoa(max+1))
	m := regexp.MustCompile(`blocked: refused with ([0-9]+) mounts: no space left on device`).FindStringSubmatch(out)
	if code == 0 || m == nil {
		t.Fatalf("mount flood not stopped by the mount limit (exit %d): %s", code, out)
	}
	if n, _ := strconv.Atoi(m[1]); n > max {
		t.Errorf("a job made %d mounts, fs.mount-max is %d", n, max)
	}
	t.Logf("a job's mount flood stopped at %s mounts (fs.mount-max %d)", m[1], max)
	f.recycle(f.a)
	if code, out := f.job(f.a, "grep -c . /proc/self/mountinfo"); code != 0 {
		t.Fatalf("the sandbox does not run the next job after a mount flood: %d %s", code, out)
	} else if n, _ := strconv.Atoi(strings.TrimSpace(out)); n > 100 {
		t.Errorf("the next job starts with %d mounts", n)
	}
}

// TestImageBuildsAllowsBuildMounts is the control of the attacks: with
// image_builds the mounts a build makes work (so that the refusals above
// are the filter's and the kernel's doing, not a broken helper), the
// root has an empty /sys, and without it the same mounts are refused.
func TestImageBuildsAllowsBuildMounts(t *testing.T) {
	script := `set -e
/berth/attack mount none / - private,rec
mkdir /tmp/u /tmp/w
/berth/attack mount /usr /tmp/u - bind,rec
/berth/attack mount /tmp/w /tmp/w - bind
/berth/attack mount none /tmp/w - remount,bind,rdonly
! touch /tmp/w/x 2>/dev/null
umount /tmp/w
touch /tmp/w/x
test -x /tmp/u/bin/sh
test -d /sys && test -z "$(ls -A /sys)"
echo ALL-DONE`
	f := newFixture(t, imageBuildsConfig)
	if code, out := f.job(f.a, script); code != 0 || !strings.HasSuffix(out, "ALL-DONE\n") {
		t.Fatalf("with image_builds a build's mounts fail (exit %d):\n%s", code, out)
	}
	off := newFixture(t, "")
	code, out := off.job(off.a, "/berth/attack mount none / - private,rec")
	if !strings.Contains(out, "blocked: operation not permitted") {
		t.Fatalf("without image_builds a propagation change is not refused (exit %d):\n%s", code, out)
	}
	// The job's log says which setting would allow it, once.
	if strings.Count(out, "image_builds = true") != 1 {
		t.Errorf("without image_builds a refused mount does not name the setting once:\n%s", out)
	}
}

// TestImageBuildsInImageJobs runs the mount attacks from a job in an image
// with image_builds on: the job's command runs in a user namespace nested
// in its init's, so the init's mounts (the /proc masks, /sys, the root)
// are locked as a plain job's are. The control's mounts work.
func TestImageBuildsInImageJobs(t *testing.T) {
	f := newImageFixture(t, imageBuildsConfig, images.Limits{})
	f.job(f.a, "true") // puts the attack helper in /berth, the image job's working directory
	// The root overlay is nodev, and a remount keeps a locked flag or fails.
	control := "cd /berth && ./attack mount none / - private,rec >/dev/null && mkdir -p /tmp/w && " +
		"./attack mount /tmp/w /tmp/w - bind,rec >/dev/null && ./attack mount none /tmp/w - remount,bind,rdonly,nodev >/dev/null && " +
		"umount /tmp/w && echo CONTROL-OK"
	if code, out := f.runIn(f.good, control); code != 0 || !strings.Contains(out, "CONTROL-OK") {
		t.Fatalf("with image_builds a build's mounts fail in an image job (exit %d):\n%s", code, out)
	}
	for _, a := range []attack{
		{"unmount a /proc mask", "/berth/attack unmount /proc/cmdline", "blocked: invalid argument"},
		{"bind /proc without its masks", "mkdir -p /tmp/p && /berth/attack mount /proc /tmp/p - bind", "blocked: invalid argument"},
		{"bind /proc with its masks and read the kernel command line",
			"mkdir -p /tmp/p && " + setUp("/proc /tmp/p - bind,rec") + " && test -s /tmp/p/cmdline && echo WORKED; cat /tmp/p/cmdline; exit 1", "Using cached image [^\n]*\n$"},
		{"unmount /sys", "/berth/attack unmount /sys", "blocked: invalid argument"},
		{"unmount the root", "/berth/attack unmount /", "blocked: invalid argument"},
		{"remount /sys read-write", "/berth/attack mount none /sys - remount,bind", "blocked: operation not permitted"},
		{"mount a tmpfs", "mkdir -p /tmp/t && /berth/attack mount tmpfs /tmp/t tmpfs none", "blocked: operation not permitted"},
		{"mount a new proc", "mkdir -p /tmp/q && /berth/attack mount proc /tmp/q proc none", "blocked: operation not permitted"},
	} {
		t.Run(a.name, func(t *testing.T) {
			code, out := f.runIn(f.good, a.script)
			if code == 0 || strings.Contains(out, "WORKED") {
				t.Fatalf("attack worked (exit %d):\n%s", code, out)
			}
			if !regexp.MustCompile(a.blocked).MatchString(out) {
				t.Errorf("attack failed, but not for the expected reason %q:\n%s", a.blocked, out)
			}
		})
	}
	// The command still gets signals and its exit status through the
	// init that now stays in between.
	if code, out := f.runIn(f.good, "exit 7"); code != 7 {
		t.Errorf("exit 7 in a nested image job: exit %d\n%s", code, out)
	}
	if code, out := f.runIn(f.good, "kill -TERM $$; sleep 5"); code != 128+15 {
		t.Errorf("a command killed by SIGTERM: exit %d, want 143\n%s", code, out)
	}
}

// TestImageBuildsKeepPrivateDirHidden is TestHidesPrivateDirInHostPath with
// image_builds: the cover over berth's directory inside a host path stays
// on, and binding the host path elsewhere does not uncover it (without
// MS_REC the kernel refuses to leave the locked cover behind; with it the
// cover comes along).
func TestImageBuildsKeepPrivateDirHidden(t *testing.T) {
	base, conf := hiddenConfigLayout(t)
	for _, network := range []string{"isolated", "host"} {
		cfg := fmt.Sprintf(`{"image_builds": true, "network": %q, "host_paths": ["/usr", "/bin", "/sbin", "/lib", "/lib64", %q]}`, network, base)
		f := newFixtureHiding(t, cfg, conf)
		hidesPrivateDir(t, f, base, conf)
		code, out := f.job(f.a, fmt.Sprintf(`mkdir /tmp/b /tmp/r
/berth/attack unmount %[1]s/berth
/berth/attack mount %[1]s /tmp/b - bind
/berth/attack mount %[1]s /tmp/r - bind,rec >/dev/null
cat /tmp/b/berth/berth.toml /tmp/r/berth/berth.toml 2>/dev/null
ls -A /tmp/r/berth | wc -l`, base))
		want := "blocked: invalid argument\nblocked: invalid argument\n0\n"
		if strings.Contains(out, secret) || out != want {
			t.Fatalf("network %s: a job uncovered %s/berth with image_builds: exit %d\n got %q\nwant %q", network, base, code, out, want)
		}
	}
}
