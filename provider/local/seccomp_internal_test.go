//go:build linux

package local

import (
	"encoding/binary"
	"runtime"
	"testing"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// onlyOn32Bit are calls go-seccomp-bpf lists for 64-bit architectures
// whose kernels have no such entry (the time64 calls of 32-bit ABIs):
// the kernel answers ENOSYS to their numbers anyway.
var onlyOn32Bit = map[string]bool{"clock_settime64": true, "clock_adjtime64": true}

// TestSyscallTable checks the filter's system call numbers for the
// running architecture against go-seccomp-bpf's tables, which the filter
// used before: every call the filter names that the library knows has the
// same number.
func TestSyscallTable(t *testing.T) {
	table, err := nativeSyscalls()
	if err != nil {
		t.Fatal(err)
	}
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skipf("go-seccomp-bpf does not know %s: %v", runtime.GOARCH, err)
	}
	if table.auditArch != uint32(info.ID) {
		t.Errorf("audit arch %#x, go-seccomp-bpf says %#x", table.auditArch, uint32(info.ID))
	}
	names := append([]string{}, deniedSyscalls...)
	for _, r := range argumentRules() {
		names = append(names, r.name)
	}
	for _, name := range names {
		want, known := info.SyscallNames[name]
		got, have := table.numbers[name]
		switch {
		case known && !have && !onlyOn32Bit[name]:
			t.Errorf("%s: missing from the table (go-seccomp-bpf: %d)", name, want)
		case known && have && got != uint32(want):
			t.Errorf("%s: %d, go-seccomp-bpf says %d", name, got, want)
		}
	}
}

// TestFilterDecidesAsBefore runs the sandbox's filter and the one
// go-seccomp-bpf assembled before (same guard and argument rules) in a
// BPF interpreter over every system call number, x32 numbers, a foreign
// architecture and the arguments the argument rules look at, and expects
// the same decision everywhere.
func TestFilterDecidesAsBefore(t *testing.T) {
	table, err := nativeSyscalls()
	if err != nil {
		t.Fatal(err)
	}
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skipf("go-seccomp-bpf does not know %s: %v", runtime.GOARCH, err)
	}
	newVM := mustVM(t, sandboxFilter(table))
	oldVM := mustVM(t, libraryFilter(t, info))
	skip := map[uint32]bool{}
	for name := range onlyOn32Bit {
		if nr, ok := info.SyscallNames[name]; ok {
			skip[uint32(nr)] = true
		}
	}
	args := [][6]uint64{
		{}, {unix.AF_VSOCK}, {unix.AF_PACKET}, {unix.AF_NETLINK, 0, unix.NETLINK_NETFILTER}, {unix.AF_INET, 1, 0},
		{unix.CLONE_NEWNET}, {unix.CLONE_NEWNET, unix.CLONE_NEWNET}, {unix.CLONE_NEWUSER | unix.CLONE_NEWNS},
	}
	checked := 0
	for _, archID := range []uint32{table.auditArch, 0x40000003 /* i386 */} {
		for _, base := range []uint32{0, x32Bit} {
			for nr := uint32(0); nr < 1024; nr++ {
				if skip[nr] {
					continue
				}
				for _, a := range args {
					in := seccompData(base|nr, archID, a)
					got, _ := newVM.Run(in)
					want, _ := oldVM.Run(in)
					if got != want {
						t.Fatalf("arch %#x nr %#x args %v: filter says %#x, before %#x", archID, base|nr, a, got, want)
					}
					checked++
				}
			}
		}
	}
	// And the decisions are the ones meant.
	cases := []struct {
		name string
		args [6]uint64
		want uint32
	}{
		{"mount", [6]uint64{}, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{"ptrace", [6]uint64{}, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{"socket", [6]uint64{unix.AF_VSOCK}, unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)},
		{"socket", [6]uint64{unix.AF_INET}, unix.SECCOMP_RET_ALLOW},
		{"clone3", [6]uint64{}, unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{"unshare", [6]uint64{unix.CLONE_NEWNET}, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{"unshare", [6]uint64{unix.CLONE_NEWNS}, unix.SECCOMP_RET_ALLOW},
	}
	for _, c := range cases {
		got, _ := newVM.Run(seccompData(table.numbers[c.name], table.auditArch, c.args))
		if uint32(got) != c.want {
			t.Errorf("%s%v: %#x, want %#x", c.name, c.args, got, c.want)
		}
	}
	if got, _ := newVM.Run(seccompData(0, 0x40000003, [6]uint64{})); uint32(got) != unix.SECCOMP_RET_KILL_PROCESS {
		t.Errorf("a foreign architecture's call: %#x, want kill", got)
	}
	t.Logf("%d inputs decided as before", checked)
}

// libraryFilter is the filter as loadSeccomp assembled it with
// go-seccomp-bpf before the sandbox had its own tables.
func libraryFilter(t *testing.T, info *arch.Info) []bpf.Instruction {
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
		t.Fatal(err)
	}
	table := sysTable{numbers: map[string]uint32{}}
	for name, nr := range info.SyscallNames {
		table.numbers[name] = uint32(nr)
	}
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}
	guard = append(guard, assembleRules(table, argumentRules())...)
	return append(guard, insts...)
}

func mustVM(t *testing.T, prog []bpf.Instruction) *bpf.VM {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// seccompData lays out struct seccomp_data (nr, arch, instruction
// pointer, six arguments) for x/net/bpf's interpreter, which loads words
// big-endian where the kernel loads them in the machine's order: each word
// holds its value big-endian, and each argument's low half sits where the
// machine keeps it (the filters load the half at that offset).
func seccompData(nr, archID uint32, args [6]uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], archID)
	lo, hi := 0, 4
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 { // big-endian machine
		lo, hi = 4, 0
	}
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i+lo:], uint32(a))
		binary.BigEndian.PutUint32(b[16+8*i+hi:], uint32(a>>32))
	}
	return b
}
