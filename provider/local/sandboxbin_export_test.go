//go:build linux

package local

// UseSandboxBinaryDir makes providers initialised from now on look for
// berth-sandbox in dir instead of beside the test binary, until the
// returned function restores the default.
func UseSandboxBinaryDir(dir string) (restore func()) {
	prev := sandboxBinaryDir
	sandboxBinaryDir = func() string { return dir }
	return func() { sandboxBinaryDir = prev }
}

// SandboxExe is the path p starts sandboxes from.
func SandboxExe(p *Provider) string { return p.sandboxBin.exe() }
