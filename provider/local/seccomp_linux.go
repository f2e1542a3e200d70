package local

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

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
// are skipped (nativeSyscalls has the numbers, seccomptable_*.go).
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

// Refusals that depend on a system call's arguments, each with the errno
// a program expects for something the kernel does not offer, so that
// programs fall back instead of failing oddly.
//
// Sockets: AF_VSOCK shares the host's port space across every network
// namespace (a channel out of network = "isolated"); AF_PACKET and
// NETLINK_NETFILTER (nf_tables) are the kernel surface most local root
// exploits through unprivileged namespaces go through.
//
// New network namespaces: a job is root in its own user namespace and could
// make one, and be CAP_NET_ADMIN in it: nf_tables, veth, bridges, the rest
// of that surface. Nothing a CI job needs does so. clone3 passes its flags
// in memory a filter cannot read, so it fails with ENOSYS and the C library
// falls back to clone, whose flags are checked (as container runtimes do).
func argumentRules() []argRule {
	cloneFlags := uint32(0) // clone's flags argument
	if runtime.GOARCH == "s390x" {
		cloneFlags = 1 // the first two arguments are swapped there
	}
	return []argRule{
		{"socket", []argCond{{0, false, unix.AF_VSOCK}}, unix.EAFNOSUPPORT},
		{"socket", []argCond{{0, false, unix.AF_PACKET}}, unix.EAFNOSUPPORT},
		{"socket", []argCond{{0, false, unix.AF_NETLINK}, {2, false, unix.NETLINK_NETFILTER}}, unix.EPROTONOSUPPORT},
		{"unshare", []argCond{{0, true, unix.CLONE_NEWNET}}, unix.EPERM},
		{"clone", []argCond{{cloneFlags, true, unix.CLONE_NEWNET}}, unix.EPERM},
		{"clone3", nil, unix.ENOSYS},
	}
}

// argRule fails a system call with errno when all its conditions hold.
type argRule struct {
	name  string
	conds []argCond
	errno unix.Errno
}

// argCond compares the low 32 bits of one argument: equal to val, or with
// the bits of val set. (The library's argument conditions do not reload
// the system call number after comparing an argument, so later rules would
// compare the wrong value; these are assembled here instead.)
type argCond struct {
	arg  uint32
	bits bool
	val  uint32
}

// assembleRules turns rules into BPF that returns at the first match and
// falls through otherwise. Rules whose system call this architecture does
// not have are skipped.
func assembleRules(table sysTable, rules []argRule) []bpf.Instruction {
	lo := argLow()
	var out []bpf.Instruction
	for _, r := range rules {
		nr, ok := table.numbers[r.name]
		if !ok {
			continue
		}
		block := []bpf.Instruction{
			bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr},
		}
		for _, c := range r.conds {
			cond := bpf.JumpNotEqual
			if c.bits {
				cond = bpf.JumpBitsNotSet
			}
			block = append(block,
				bpf.LoadAbsolute{Off: 16 + 8*c.arg + lo, Size: 4}, // seccomp_data.args[c.arg]
				bpf.JumpIf{Cond: cond, Val: c.val})
		}
		block = append(block, bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(r.errno)})
		// Every jump leaves the block when its test fails.
		for i, in := range block {
			if j, ok := in.(bpf.JumpIf); ok {
				j.SkipTrue = uint8(len(block) - 1 - i)
				block[i] = j
			}
		}
		out = append(out, block...)
	}
	return out
}

// buildMountCalls are the calls of deniedSyscalls that image_builds
// allows: mount(2) as far as mountRules lets it through, and unmounting,
// which the kernel refuses for every mount a job inherited (they are
// locked, jobns_linux.go) and which undoes only the job's own.
var buildMountCalls = map[string]bool{"mount": true, "umount": true, "umount2": true}

// Mount flags as mount(2) takes them (unix has them as int).
const (
	msRDONLY      = uint32(unix.MS_RDONLY)
	msREMOUNT     = uint32(unix.MS_REMOUNT)
	msBIND        = uint32(unix.MS_BIND)
	msREC         = uint32(unix.MS_REC)
	msSILENT      = uint32(unix.MS_SILENT)
	msPRIVATE     = uint32(unix.MS_PRIVATE)
	msSLAVE       = uint32(unix.MS_SLAVE)
	msSHARED      = uint32(unix.MS_SHARED)
	msUNBINDABLE  = uint32(unix.MS_UNBINDABLE)
	mountFlagsArg = 3 // mount(source, target, fstype, flags, data)
)

// mountRules is the BPF that decides every mount(2) under image_builds,
// on its flags alone: seccomp cannot read the source, target, type and
// data strings behind mount's pointers, and need not. The kernel's
// path_mount (fs/namespace.c) dispatches on the flags in this order, and
// only the last branch, a new mount, reads the type: so a call is
//   - a read-only bind remount when MS_REMOUNT and MS_BIND are set
//     (do_reconfigure_mnt, which changes per-mount flags only): allowed
//     with MS_RDONLY set, refused without (it would make a bind writable);
//   - any other remount (MS_REMOUNT without MS_BIND, which reconfigures
//     the file system itself): refused;
//   - a bind (do_loopback) when MS_BIND is set: allowed, whatever else is
//     set (the kernel ignores every other flag but MS_REC there);
//   - a propagation change (do_change_type) when the flags are exactly one
//     of MS_PRIVATE, MS_SLAVE, MS_SHARED, MS_UNBINDABLE, with MS_REC or
//     MS_SILENT or both: allowed;
//   - anything else (MS_MOVE, and every new mount: tmpfs, overlay, proc,
//     sysfs, cgroup2, whatever its type string says): refused.
//
// The exact comparison for propagation changes matters: path_mount first
// drops the top 16 bits when they hold the old magic 0xC0ED, which
// includes the bits of MS_PRIVATE and MS_SLAVE, and a test for "some
// propagation bit set" would let such a call through as a new mount of
// any type. Bits above the low 32 reach no branch of path_mount.
func mountRules(table sysTable) []bpf.Instruction {
	nr, ok := table.numbers["mount"]
	if !ok {
		return nil
	}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	deny := bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}
	roRemount := msREMOUNT | msBIND | msRDONLY
	prog := []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 14}, // to 16, past the block
		/* 2 */ bpf.LoadAbsolute{Off: 16 + 8*mountFlagsArg + argLow(), Size: 4},
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: msBIND, SkipFalse: 5}, // to 9
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: msREMOUNT, SkipFalse: 3}, // a bind: to 8
		/* 5 */ bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: roRemount},
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: roRemount, SkipTrue: 1},
		/* 7 */ deny, // a bind remount without MS_RDONLY
		/* 8 */ allow,
		/* 9 */ bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: ^(msREC | msSILENT)},
		/* 10 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: msPRIVATE, SkipTrue: 4},
		/* 11 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: msSLAVE, SkipTrue: 3},
		/* 12 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: msSHARED, SkipTrue: 2},
		/* 13 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: msUNBINDABLE, SkipTrue: 1},
		/* 14 */ deny,
		/* 15 */ allow,
	}
	return prog
}

// argLow is the offset of an argument's low half within its 8 bytes of
// seccomp_data.
func argLow() uint32 {
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 {
		return 4
	}
	return 0
}

// sysTable is what the filter needs to know of the running architecture:
// its audit architecture, whether the x32 ABI shares it (numbers with
// x32Bit set), and the numbers of the system calls the filter names.
type sysTable struct {
	auditArch uint32
	x32       bool
	numbers   map[string]uint32
}

// x32Bit marks system calls of the x32 ABI, which x86-64 kernels accept
// under x86-64's audit architecture.
const x32Bit = 0x40000000

// mountPolicy is what the filter does with mount(2).
type mountPolicy int

const (
	// mountsRefused fails every mount call with EPERM.
	mountsRefused mountPolicy = iota
	// mountsNoted hands mount calls to the filter's listener (PID 1,
	// mountnote_linux.go), which fails each with EPERM and tells the
	// job's log once that provider_config image_builds would allow a
	// build's mounts.
	mountsNoted
	// mountsForBuilds is provider_config image_builds: mount(2) as
	// mountRules allows, and unmounting.
	mountsForBuilds
)

// sandboxFilter is the sandbox's seccomp program for table's
// architecture, with mounts as policy says. seccomp_data holds the system
// call number at offset 0 and the audit architecture at offset 4.
func sandboxFilter(table sysTable, policy mountPolicy) []bpf.Instruction {
	builds := policy == mountsForBuilds
	prog := []bpf.Instruction{
		// Another ABI's numbers mean other calls: kill.
		bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: table.auditArch, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
	}
	if table.x32 {
		// x32 calls would pass every check below under numbers of their
		// own; programs fall back from ENOSYS.
		prog = append(prog,
			bpf.LoadAbsolute{Off: 0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
			bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)})
	}
	prog = append(prog, assembleRules(table, argumentRules())...)
	switch nr, ok := table.numbers["mount"]; {
	case builds:
		prog = append(prog, mountRules(table)...)
	case policy == mountsNoted && ok:
		prog = append(prog,
			bpf.LoadAbsolute{Off: 0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: 1},
			bpf.RetConstant{Val: unix.SECCOMP_RET_USER_NOTIF})
	}
	var denied []uint32
	for _, name := range deniedSyscalls {
		if builds && buildMountCalls[name] {
			continue
		}
		if nr, ok := table.numbers[name]; ok {
			denied = append(denied, nr)
		}
	}
	// One comparison per denied call, each jumping to the EPERM at the
	// end (BPF jumps reach 255 instructions ahead).
	prog = append(prog, bpf.LoadAbsolute{Off: 0, Size: 4})
	for i, nr := range denied {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(denied) - i)})
	}
	return append(prog,
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)})
}

// loadSeccomp sets no_new_privs and installs the sandbox's seccomp filter,
// with allThreads on every thread of the calling process (TSYNC),
// otherwise on the calling thread only (the caller must keep its goroutine
// locked to it); every process started afterwards from a filtered thread
// inherits both. System calls of another ABI than the native one (32-bit
// calls on x86-64, for example) kill the process: the filter could not
// tell their numbers apart. With mountsNoted it returns the filter's
// listener (the kernel refuses a listener with allThreads); otherwise -1.
func loadSeccomp(allThreads bool, policy mountPolicy) (int, error) {
	table, err := nativeSyscalls()
	if err != nil {
		return -1, fmt.Errorf("seccomp: %w", err)
	}
	raw, err := bpf.Assemble(sandboxFilter(table, policy))
	if err != nil {
		return -1, fmt.Errorf("seccomp: assemble BPF: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, fmt.Errorf("set no_new_privs: %w", err)
	}
	flags := uintptr(0)
	if allThreads {
		flags = unix.SECCOMP_FILTER_FLAG_TSYNC
	} else if policy == mountsNoted {
		flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	}
	r, err := installFilter(filter, flags)
	if err != nil {
		return -1, fmt.Errorf("install seccomp filter: %w", err)
	}
	if flags == unix.SECCOMP_FILTER_FLAG_NEW_LISTENER {
		return r, nil
	}
	return -1, nil
}

// sealSeccomp gives every thread of the process the filter of the calling
// thread (and its no_new_privs) by installing, with TSYNC, a filter that
// allows everything on top of it.
func sealSeccomp() error {
	allow := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	_, err := installFilter(allow, unix.SECCOMP_FILTER_FLAG_TSYNC)
	return err
}

// installFilter installs filter on the calling thread, or with TSYNC in
// flags on every thread at once, and returns the kernel's result: the
// listener's descriptor with SECCOMP_FILTER_FLAG_NEW_LISTENER. TSYNC
// fails, with the ID of the thread as the result rather than an errno,
// when a thread holds a filter the caller does not.
func installFilter(filter []unix.SockFilter, flags uintptr) (int, error) {
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return -1, errno
	}
	if flags&unix.SECCOMP_FILTER_FLAG_TSYNC != 0 && r != 0 {
		return -1, fmt.Errorf("thread %d holds a filter the calling thread does not", r)
	}
	return int(r), nil
}
