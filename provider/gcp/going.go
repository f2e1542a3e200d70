package gcp

import (
	"fmt"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/berth-ci/berth/provider"
)

// goingErr marks err with provider.ErrInstanceGoing when the instance is
// stopping or stopped (STOPPING, TERMINATED): a managed instance group
// recreates or deletes such a member (Compute Engine, "Instance life
// cycle", and managed instance groups' autohealing), and a preempted Spot
// VM goes the same way. berth then books no job there and moves a job
// that has not reached it yet. SUSPENDING and SUSPENDED are berth's own
// suspends, not a loss.
func goingErr(in *computepb.Instance, err error) error {
	switch in.GetStatus() {
	case "STOPPING", "TERMINATED":
		return fmt.Errorf("%w: %w", err, provider.ErrInstanceGoing)
	}
	return err
}
