//go:build linux

package local_test

import (
	"testing"

	"github.com/berth-ci/berth/internal/sandboxtest"
)

// unprivEnv marks the copy of the test binary that TestUnprivileged runs as
// nobody.
const unprivEnv = "BERTH_LOCAL_TEST_UNPRIVILEGED"

// TestUnprivileged re-runs this package's tests as nobody (uid 65534) with
// setpriv, so that the user namespace path is tested even when CI runs as
// root. Run unprivileged, the other tests cover it directly.
func TestUnprivileged(t *testing.T) {
	sandboxtest.RerunAsNobody(t, unprivEnv, nil, "-test.run",
		"^(TestConformance|TestJobsRunTheSameOverTheLocalPathAndSSH|TestLocalPathAcrossSuspendAndResume|TestLocalPathSandboxKilledMidCommand|TestAdoptedSandboxRunsOverSSH|TestRecycleOverTheExecSocket|TestSandboxLooksLikeAMachine|TestDisconnectKillsCommand|TestOutlivesProvider|TestDeadSandboxReported|TestSuspendSurvivesRestart|TestPidsLimit|TestSandboxesStartThroughTheSpawner|TestSpawnerThatDiesIsReplaced|TestUnprivileged)$")
}
