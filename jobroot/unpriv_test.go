//go:build linux

package jobroot_test

import (
	"testing"

	"github.com/berth-ci/berth/internal/sandboxtest"
)

// TestUnprivileged re-runs the job tests as nobody: a cloud instance reached
// as an ordinary user gets its images through an unprivileged user
// namespace, where the job's root is the only mapped ID.
func TestUnprivileged(t *testing.T) {
	sandboxtest.RerunAsNobody(t, "BERTH_JOBROOT_TEST_UNPRIVILEGED", nil, "-test.run",
		"^(TestJobRunsInTheImageWithAFreshRoot|TestEntrypointOverrideAndExitCode|TestImageUser|TestServiceReachedByAlias|TestServiceVariablesAndPortWaitedFor|TestDebugServicesShowsTheServiceLog|TestJobUserFromTheJob|TestUnprivileged)$")
}
