package local

import "golang.org/x/sys/unix"

// nativeSyscalls is the filter's view of aarch64: the calls both release
// architectures have (seccomptable_linux.go).
func nativeSyscalls() (sysTable, error) {
	return sysTable{auditArch: unix.AUDIT_ARCH_AARCH64, numbers: releaseSyscalls()}, nil
}
