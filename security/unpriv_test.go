//go:build linux

package security_test

import (
	"os"
	"sync"
	"testing"

	"github.com/berth-ci/berth/internal/sandboxtest"
)

var (
	builtOnce sync.Once
	builtPath string
	builtErr  error
)

// TestUnprivileged re-runs the whole suite as nobody (uid 65534) with
// setpriv, so that both modes are attacked whoever runs the tests.
func TestUnprivileged(t *testing.T) {
	// The attack helper and the CLI are built once, by root, and handed to
	// the copy.
	// BERTH_SECURITY_UNPRIV_RUN narrows the copy to the tests it
	// matches (-test.run), for working on one attack.
	var args []string
	if run := os.Getenv("BERTH_SECURITY_UNPRIV_RUN"); run != "" {
		args = []string{"-test.run", run}
	}
	sandboxtest.RerunAsNobody(t, unprivEnv, []string{attackEnv + "=" + attackBinary(t), cliEnv + "=" + berthBinary(t)}, args...)
}
