// Command attack tries one escape from inside a sandbox and reports what the
// kernel said. It is built by the security tests and run inside real jobs;
// it exits 0 only when the attack worked.
package main

import (
	"fmt"
	"net"
	"os"
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
	case "unmount":
		err = unix.Unmount(os.Args[2], unix.MNT_DETACH)
	case "settime":
		tv := unix.Timeval{Sec: 946684800}
		err = unix.Settimeofday(&tv)
	default:
		err = fmt.Errorf("unknown attack %q", os.Args[1])
	}
	if err != nil {
		fmt.Printf("blocked: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("WORKED")
}
