//go:build linux

package local

// UseSandboxGOMAXPROCS sets the GOMAXPROCS sandboxes started from now on
// get, and returns a function that restores the default.
func UseSandboxGOMAXPROCS(v string) (restore func()) {
	old := sandboxGOMAXPROCS
	sandboxGOMAXPROCS = v
	return func() { sandboxGOMAXPROCS = old }
}
