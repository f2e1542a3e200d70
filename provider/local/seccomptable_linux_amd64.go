package local

import "golang.org/x/sys/unix"

// nativeSyscalls is the filter's view of x86_64: the calls both release
// architectures have (seccomptable_linux.go), plus x86's port I/O.
func nativeSyscalls() (sysTable, error) {
	numbers := releaseSyscalls()
	numbers["iopl"] = unix.SYS_IOPL
	numbers["ioperm"] = unix.SYS_IOPERM
	return sysTable{auditArch: unix.AUDIT_ARCH_X86_64, x32: true, numbers: numbers}, nil
}
