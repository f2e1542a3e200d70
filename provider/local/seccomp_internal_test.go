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
	newVM := mustVM(t, sandboxFilter(table, mountsRefused))
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

// TestImageBuildsMountFilter runs the filter with image_builds on and off
// over the mount(2) flags a build uses and the ones an attacker would try:
// with it, binds, propagation changes and read-only bind remounts pass
// and nothing else; without it, no mount call passes. Every other call is
// decided as without image_builds.
func TestImageBuildsMountFilter(t *testing.T) {
	table, err := nativeSyscalls()
	if err != nil {
		t.Fatal(err)
	}
	builds := mustVM(t, sandboxFilter(table, mountsForBuilds))
	plain := mustVM(t, sandboxFilter(table, mountsRefused))
	const (
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		magic = 0xC0ED0000 // MS_MGC_VAL, which path_mount strips
	)
	cases := []struct {
		what  string
		flags uint64
		want  uint32
	}{
		{"bind", unix.MS_BIND, allow},
		{"recursive bind", unix.MS_BIND | unix.MS_REC, allow},
		{"bind with flags the kernel ignores", unix.MS_BIND | unix.MS_REC | unix.MS_NOSUID | unix.MS_PRIVATE, allow},
		{"bind with the magic", magic | unix.MS_BIND, allow},
		{"make private", unix.MS_PRIVATE, allow},
		{"make private recursively (buildah's 0x44000)", unix.MS_PRIVATE | unix.MS_REC, allow},
		{"make slave", unix.MS_SLAVE | unix.MS_REC | unix.MS_SILENT, allow},
		{"make shared", unix.MS_SHARED, allow},
		{"make unbindable", unix.MS_UNBINDABLE | unix.MS_REC, allow},
		{"read-only bind remount", unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY, allow},
		{"read-only bind remount with nosuid, nodev", unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV, allow},
		{"read-write bind remount", unix.MS_REMOUNT | unix.MS_BIND, eperm},
		{"read-write bind remount with nosuid", unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID, eperm},
		{"plain remount read-only", unix.MS_REMOUNT | unix.MS_RDONLY, eperm},
		{"plain remount read-write", unix.MS_REMOUNT, eperm},
		{"move", unix.MS_MOVE, eperm},
		{"new mount (tmpfs, overlay, proc: the type is not read)", 0, eperm},
		{"new mount with nosuid, nodev", unix.MS_NOSUID | unix.MS_NODEV, eperm},
		{"new mount read-only", unix.MS_RDONLY, eperm},
		{"two propagation types", unix.MS_PRIVATE | unix.MS_SHARED, eperm},
		{"propagation with another flag", unix.MS_PRIVATE | unix.MS_NOSUID, eperm},
		{"new mount behind the magic (drops MS_PRIVATE's bit)", magic | unix.MS_PRIVATE, eperm},
		{"new mount behind the magic", magic, eperm},
		{"new mount with the high half set", 1 << 40, eperm},
		{"bind in the high half only", unix.MS_BIND << 32, eperm},
	}
	mount := table.numbers["mount"]
	for _, c := range cases {
		in := seccompData(mount, table.auditArch, [6]uint64{0, 0, 0, c.flags})
		if got, _ := builds.Run(in); uint32(got) != c.want {
			t.Errorf("image_builds, %s (%#x): %#x, want %#x", c.what, c.flags, got, c.want)
		}
		if got, _ := plain.Run(in); uint32(got) != eperm {
			t.Errorf("without image_builds, %s (%#x): %#x, want EPERM", c.what, c.flags, got)
		}
	}
	for name, want := range map[string]uint32{
		"umount2": allow, "umount": allow,
		"pivot_root": eperm, "fsopen": eperm, "fsconfig": eperm, "fsmount": eperm, "fspick": eperm,
		"move_mount": eperm, "open_tree": eperm, "mount_setattr": eperm,
	} {
		nr, ok := table.numbers[name]
		if !ok {
			continue // not on this architecture
		}
		in := seccompData(nr, table.auditArch, [6]uint64{})
		if got, _ := builds.Run(in); uint32(got) != want {
			t.Errorf("image_builds, %s: %#x, want %#x", name, got, want)
		}
		if got, _ := plain.Run(in); uint32(got) != eperm {
			t.Errorf("without image_builds, %s: %#x, want EPERM", name, got)
		}
	}
	// Nothing else changes. Noted, mount goes to PID 1 (which answers
	// EPERM), and nothing else changes either.
	noted := mustVM(t, sandboxFilter(table, mountsNoted))
	for nr := uint32(0); nr < 1024; nr++ {
		name := nameOf(table, nr)
		for _, a := range [][6]uint64{{}, {unix.CLONE_NEWNET}, {unix.AF_VSOCK}, {0, 0, 0, unix.MS_BIND}} {
			in := seccompData(nr, table.auditArch, a)
			want, _ := plain.Run(in)
			if got, _ := noted.Run(in); name == "mount" && uint32(got) != unix.SECCOMP_RET_USER_NOTIF {
				t.Errorf("noted, mount%v: %#x, want USER_NOTIF", a, got)
			} else if name != "mount" && got != want {
				t.Fatalf("nr %d args %v: noted says %#x, refused %#x", nr, a, got, want)
			}
			if buildMountCalls[name] {
				continue
			}
			if got, _ := builds.Run(in); got != want {
				t.Fatalf("nr %d args %v: image_builds says %#x, without %#x", nr, a, got, want)
			}
		}
	}
}

func nameOf(table sysTable, nr uint32) string {
	for name, n := range table.numbers {
		if n == nr {
			return name
		}
	}
	return ""
}
