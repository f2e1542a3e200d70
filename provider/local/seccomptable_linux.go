//go:build linux && (amd64 || arm64)

package local

import "golang.org/x/sys/unix"

// releaseSyscalls are the numbers, from golang.org/x/sys/unix, of the
// system calls the filter names that amd64 and arm64 (the release
// architectures) both have; each adds its own (seccomptable_linux_*.go).
// TestSyscallTable checks them against go-seccomp-bpf's tables. Listing them
// here instead of asking that library keeps its tables of every
// architecture, built at start-up, out of every sandbox process.
func releaseSyscalls() map[string]uint32 {
	return map[string]uint32{
		"mount":             unix.SYS_MOUNT,
		"umount2":           unix.SYS_UMOUNT2,
		"pivot_root":        unix.SYS_PIVOT_ROOT,
		"open_tree":         unix.SYS_OPEN_TREE,
		"open_tree_attr":    unix.SYS_OPEN_TREE_ATTR,
		"move_mount":        unix.SYS_MOVE_MOUNT,
		"fsopen":            unix.SYS_FSOPEN,
		"fsconfig":          unix.SYS_FSCONFIG,
		"fsmount":           unix.SYS_FSMOUNT,
		"fspick":            unix.SYS_FSPICK,
		"mount_setattr":     unix.SYS_MOUNT_SETATTR,
		"ptrace":            unix.SYS_PTRACE,
		"process_vm_readv":  unix.SYS_PROCESS_VM_READV,
		"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
		"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
		"kexec_load":        unix.SYS_KEXEC_LOAD,
		"kexec_file_load":   unix.SYS_KEXEC_FILE_LOAD,
		"init_module":       unix.SYS_INIT_MODULE,
		"finit_module":      unix.SYS_FINIT_MODULE,
		"delete_module":     unix.SYS_DELETE_MODULE,
		"clock_settime":     unix.SYS_CLOCK_SETTIME,
		"clock_adjtime":     unix.SYS_CLOCK_ADJTIME,
		"settimeofday":      unix.SYS_SETTIMEOFDAY,
		"adjtimex":          unix.SYS_ADJTIMEX,
		"keyctl":            unix.SYS_KEYCTL,
		"add_key":           unix.SYS_ADD_KEY,
		"request_key":       unix.SYS_REQUEST_KEY,
		"bpf":               unix.SYS_BPF,
		"perf_event_open":   unix.SYS_PERF_EVENT_OPEN,
		"userfaultfd":       unix.SYS_USERFAULTFD,
		"io_uring_setup":    unix.SYS_IO_URING_SETUP,
		"io_uring_enter":    unix.SYS_IO_URING_ENTER,
		"io_uring_register": unix.SYS_IO_URING_REGISTER,
		"reboot":            unix.SYS_REBOOT,
		"swapon":            unix.SYS_SWAPON,
		"swapoff":           unix.SYS_SWAPOFF,
		"syslog":            unix.SYS_SYSLOG,
		"acct":              unix.SYS_ACCT,
		"quotactl":          unix.SYS_QUOTACTL,
		"lookup_dcookie":    unix.SYS_LOOKUP_DCOOKIE,
		"socket":            unix.SYS_SOCKET,
		"unshare":           unix.SYS_UNSHARE,
		"clone":             unix.SYS_CLONE,
		"clone3":            unix.SYS_CLONE3,
	}
}
