//go:build linux && !amd64 && !arm64

package local

import (
	"github.com/elastic/go-seccomp-bpf/arch"
)

// nativeSyscalls is the filter's view of the running architecture, from
// go-seccomp-bpf's tables; amd64 and arm64, the release architectures,
// have their own (seccomptable_linux_*.go).
func nativeSyscalls() (sysTable, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return sysTable{}, err
	}
	t := sysTable{auditArch: uint32(info.ID), x32: false, numbers: map[string]uint32{}}
	for name, nr := range info.SyscallNames {
		t.numbers[name] = uint32(nr)
	}
	return t, nil
}
