// Command attack tries one escape from inside a sandbox and reports what the
// kernel said. It is built by the security tests and run inside real jobs;
// it exits 0 only when the attack worked.
package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attack open_by_handle_at|connect ADDR|ptrace PID|bpf|keyctl|mount_setattr|open_tree")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "open_by_handle_at":
		// The "shocker" escape: a handle for inode 2, the root of the
		// file system /etc lives on, opened relative to /etc.
		var fd int
		fd, err = unix.Open("/etc", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err == nil {
			h := unix.NewFileHandle(1, []byte{2, 0, 0, 0, 0, 0, 0, 0})
			var f int
			f, err = unix.OpenByHandleAt(fd, h, unix.O_RDONLY)
			if err == nil {
				unix.Close(f)
			}
		}
	case "connect":
		var c net.Conn
		c, err = net.DialTimeout("tcp", os.Args[2], 3*time.Second)
		if err == nil {
			c.Close()
		}
	case "ptrace":
		var pid int
		fmt.Sscan(os.Args[2], &pid)
		err = unix.PtraceAttach(pid)
	case "bpf":
		_, _, e := unix.Syscall(unix.SYS_BPF, 0, 0, 0)
		if e != 0 {
			err = e
		}
	case "keyctl":
		_, err = unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_USER_KEYRING, 0, 0, 0)
	case "mount_setattr":
		attr := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		err = unix.MountSetattr(unix.AT_FDCWD, "/usr", unix.AT_RECURSIVE, &attr)
	case "open_tree":
		var fd int
		fd, err = unix.OpenTree(unix.AT_FDCWD, "/usr", unix.OPEN_TREE_CLONE)
		if err == nil {
			unix.Close(fd)
		}
	case "mount":
		err = mount(os.Args[2], os.Args[3], os.Args[4], os.Args[5])
	case "mountflood":
		err = mountFlood(os.Args[2], os.Args[3])
	case "unmount":
		err = unix.Unmount(os.Args[2], unix.MNT_DETACH)
	case "settime":
		tv := unix.Timeval{Sec: 946684800}
		err = unix.Settimeofday(&tv)
	case "taint":
		err = taint(os.Args[2:])
	case "xattrs":
		for _, dir := range os.Args[2:] {
			fmt.Printf("%s: %s\n", dir, xattrs(dir))
		}
		os.Exit(0)
	case "unix":
		var c net.Conn
		c, err = net.DialTimeout("unix", os.Args[2], 3*time.Second)
		if err == nil {
			c.Close()
		}
	case "watch":
		err = watch(os.Args[2], os.Args[3])
	case "flood":
		err = flood(os.Args[2], os.Args[3], os.Args[4])
	case "socket":
		err = socket(os.Args[2])
	case "userns":
		err = hold(os.Args[2], userNamespace)
	case "procs":
		err = hold(os.Args[2], func() error { return startSleep(nil) })
	case "inotify":
		err = hold(os.Args[2], func() error { _, err := unix.InotifyInit1(unix.IN_CLOEXEC); return err })
	default:
		err = fmt.Errorf("unknown attack %q", os.Args[1])
	}
	for _, c := range children {
		c.Kill()
		c.Wait()
	}
	if err != nil {
		fmt.Printf("blocked: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("WORKED")
}

// socket opens a socket of a family (and protocol) a sandbox refuses.
func socket(kind string) error {
	var fd int
	var err error
	switch kind {
	case "vsock":
		fd, err = unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	case "packet":
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	case "nfnetlink":
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER)
	default:
		return fmt.Errorf("unknown socket kind %q", kind)
	}
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// hold makes kernel objects with make, keeping them all, until it has made
// n of them (the attack worked) or the kernel refuses one (it reports how
// many it got).
func hold(n string, mk func() error) error {
	var want int
	fmt.Sscan(n, &want)
	for got := 0; got < want; got++ {
		if err := mk(); err != nil {
			return fmt.Errorf("refused after %d: %w", got, err)
		}
	}
	fmt.Printf("held %s\n", n)
	return nil
}

// userNamespace starts a process in a new user namespace and leaves it
// running, which keeps the namespace alive.
func userNamespace() error {
	return startSleep(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER})
}

// startSleep starts a sleeping child and keeps it.
func startSleep(attr *syscall.SysProcAttr) error {
	cmd := exec.Command("/bin/sleep", "120")
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return err
	}
	children = append(children, cmd.Process)
	return nil
}

// children are the processes an attack started; they are killed before it
// exits, so that the job leaves nothing behind for the next attack.
var children []*os.Process

// taint leaves a user.* attribute and a default POSIX ACL (a named entry for uid 0, mapped in every sandbox)
// on each directory, which new files would inherit.
func taint(dirs []string) error {
	le := binary.LittleEndian
	acl := le.AppendUint32(nil, 2) // POSIX_ACL_XATTR_VERSION
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{1, 7, 0xffffffff}, {2, 7, 0}, {4, 5, 0xffffffff}, {0x10, 7, 0xffffffff}, {0x20, 5, 0xffffffff}} {
		acl = le.AppendUint32(le.AppendUint16(le.AppendUint16(acl, e.tag), e.perm), e.id)
	}
	for _, dir := range dirs {
		if err := unix.Setxattr(dir, "user.berth", []byte("leak"), 0); err != nil {
			return fmt.Errorf("user xattr on %s: %w", dir, err)
		}
		if err := unix.Setxattr(dir, "system.posix_acl_default", acl, 0); err != nil {
			return fmt.Errorf("default ACL on %s: %w", dir, err)
		}
	}
	return nil
}

// xattrs lists the extended attribute names of dir.
func xattrs(dir string) string {
	buf := make([]byte, 4096)
	n, err := unix.Listxattr(dir, buf)
	if err != nil {
		return err.Error()
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(string(buf[:n]), "\x00", " ")), ",")
}

// watch waits up to d for an inotify event on path, which another tenant's
// use of the file would cause.
func watch(path, d string) error {
	wait, err := time.ParseDuration(d)
	if err != nil {
		return err
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_ALL_EVENTS); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n, _ := unix.Read(fd, buf); n > 0 {
			return nil
		}
	}
	return fmt.Errorf("no event on %s in %s", path, d)
}

// flood opens n idle TCP connections to addr (raising its own descriptor
// limit as far as the hard limit allows), then creates dir/flooding and
// holds them until dir/stop exists (a minute at most). It "works" when it
// could hold them all; whether the target survives is for the caller to
// check.
func flood(addr, n, dir string) error {
	var want int
	fmt.Sscan(n, &want)
	var l unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &l)
	l.Cur = l.Max
	unix.Setrlimit(unix.RLIMIT_NOFILE, &l)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for len(conns) < want {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			err = fmt.Errorf("refused after %d: %w", len(conns), err)
			if len(conns) > 0 { // room for the marker's descriptor
				conns[0].Close()
				conns = conns[1:]
			}
			os.WriteFile(dir+"/flooding", nil, 0o644)
			return err
		}
		conns = append(conns, c)
	}
	fmt.Printf("holding %d connections\n", len(conns))
	os.WriteFile(dir+"/flooding", nil, 0o644)
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(dir + "/stop"); err == nil {
			break
		}
	}
	return nil
}

// mountFlags are the mount(2) flags the mount attack takes by name;
// "magic" is the old MS_MGC_VAL the kernel strips from the top 16 bits.
var mountFlags = map[string]uintptr{
	"bind": unix.MS_BIND, "rec": unix.MS_REC, "remount": unix.MS_REMOUNT, "rdonly": unix.MS_RDONLY,
	"private": unix.MS_PRIVATE, "shared": unix.MS_SHARED, "slave": unix.MS_SLAVE, "move": unix.MS_MOVE,
	"nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV, "magic": 0xC0ED0000, "none": 0,
}

// mount calls mount(2) directly (mount(8) may use other calls) with the
// comma-separated flags named in flags; fstype "-" is none.
func mount(src, dst, fstype, flags string) error {
	var f uintptr
	for _, name := range strings.Split(flags, ",") {
		v, ok := mountFlags[name]
		if !ok {
			return fmt.Errorf("unknown mount flag %q", name)
		}
		f |= v
	}
	if fstype == "-" {
		fstype = ""
	}
	return unix.Mount(src, dst, fstype, f, "")
}

// mountFlood makes mounts in dir until there are n in the job's mount
// namespace (the attack worked) or the kernel refuses one (it reports how
// many there were). Each round binds dir recursively into a new directory
// of itself, doubling the mounts under it: a flood in few calls.
func mountFlood(dir, n string) error {
	var want int
	fmt.Sscan(n, &want)
	for i := 0; ; i++ {
		have, err := countMounts()
		if err != nil {
			return err
		}
		if have >= want {
			fmt.Printf("held %d mounts\n", have)
			return nil
		}
		d := fmt.Sprintf("%s/%d", dir, i)
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(dir, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("refused with %d mounts: %w", have, err)
		}
	}
}

// countMounts counts the mounts of the caller's mount namespace.
func countMounts() (int, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	return strings.Count(string(b), "\n"), err
}
