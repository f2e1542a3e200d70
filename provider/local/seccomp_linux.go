package local

import (
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM inside every sandbox. Together they keep a
// job from changing what it sees of the file system (the mount family, old
// and new API), from reaching other processes' memory (ptrace and
// process_vm_*), from the file-handle escape (open_by_handle_at), from the
// kernel itself (modules, kexec, bpf, perf, keyrings, reboot, swap, syslog,
// acct) and from the clock. io_uring is denied as container runtimes deny
// it: a large kernel surface that programs fall back from. Names the running architecture does not have
// are skipped.
var deniedSyscalls = []string{
	"mount", "umount", "umount2", "pivot_root",
	"open_tree", "open_tree_attr", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"ptrace", "process_vm_readv", "process_vm_writev",
	"open_by_handle_at",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"clock_settime", "clock_settime64", "clock_adjtime", "clock_adjtime64", "settimeofday", "adjtimex", "stime",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	"reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "lookup_dcookie",
	"iopl", "ioperm",
}

// loadSeccomp sets no_new_privs and installs the sandbox's seccomp filter on
// every thread of the calling process; every process started afterwards
// inherits both. System calls of another ABI than the native one (32-bit
// calls on x86-64, for example) kill the process: the filter could not tell
// their numbers apart.
func loadSeccomp() error {
	info, err := arch.GetInfo("")
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	var names []string
	for _, n := range deniedSyscalls {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls:      []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: names}},
	}
	insts, err := policy.Assemble()
	if err != nil {
		return fmt.Errorf("seccomp: assemble filter: %w", err)
	}
	// The library lets foreign architectures through to the default
	// action (allow); check the architecture first and kill otherwise.
	// seccomp_data.arch is at offset 4.
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}
	raw, err := bpf.Assemble(append(guard, insts...))
	if err != nil {
		return fmt.Errorf("seccomp: assemble BPF: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	// TSYNC applies the filter, and no_new_privs, to every thread of the
	// Go runtime at once.
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("install seccomp filter: %w", errno)
	}
	return nil
}
