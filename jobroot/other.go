//go:build !linux

package jobroot

import (
	"fmt"
	"os"
)

// RunIfRequested refuses to act as the runner where Linux namespaces do
// not exist; otherwise it returns at once.
func RunIfRequested() {
	if os.Getenv(modeEnv) == "" {
		return
	}
	fmt.Fprintln(os.Stderr, "berth: jobs in images need a Linux instance (namespaces, overlayfs)")
	os.Exit(ExitSetupFailed)
}
