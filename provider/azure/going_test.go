package azure

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
)

// An instance the set is deleting is going: ConnectInfo says so with
// provider.ErrInstanceGoing, so that berth moves a job booked there to
// another instance instead of failing it (issue 43, item 7). A running
// one is not.
func TestConnectInfoOfADeletingInstanceIsGoing(t *testing.T) {
	opts := quick
	opts.DeleteTime = time.Minute
	f := fakeAzure(t, opts)
	g, _ := f.newGroup(t, nil)
	g.Increase(context.Background(), 2)
	name := f.Options().ScaleSet
	eventually(t, "two running", func() bool { return count(listing(t, g), provider.StateRunning) == 2 })
	if _, err := g.ConnectInfo(context.Background(), name+"_0"); err != nil {
		t.Fatalf("ConnectInfo of a running instance: %v", err)
	}
	if _, err := g.Decrease(context.Background(), []string{name + "_0"}); err != nil {
		t.Fatal(err)
	}
	_, err := g.ConnectInfo(context.Background(), name+"_0")
	if !errors.Is(err, provider.ErrInstanceGoing) || !errors.Is(err, ErrInvalidState) {
		t.Errorf("ConnectInfo of an instance being deleted: %v; want ErrInstanceGoing", err)
	}
	if _, err := g.ConnectInfo(context.Background(), name+"_1"); err != nil {
		t.Errorf("ConnectInfo of the other, running: %v", err)
	}
}

// Which states are going, by provisioning and power state.
func TestGoingStates(t *testing.T) {
	base := errors.New("not running")
	for _, c := range []struct {
		s     vmState
		going bool
	}{
		{vmState{provisioning: "deleting", power: "running"}, true},
		{vmState{provisioning: "succeeded", power: "deallocating"}, true},
		{vmState{provisioning: "succeeded", power: "deallocated"}, true},
		{vmState{provisioning: "succeeded", power: "stopping"}, true},
		{vmState{provisioning: "succeeded", power: "stopped"}, true},
		{vmState{provisioning: "creating", power: "starting"}, false},
		{vmState{provisioning: "updating", power: "starting"}, false},
		{vmState{provisioning: "failed", power: "running"}, false},
	} {
		err := goingErr(c.s, base)
		if got := errors.Is(err, provider.ErrInstanceGoing); got != c.going || !errors.Is(err, base) {
			t.Errorf("%+v: %v; want going %v, wrapping the error", c.s, err, c.going)
		}
	}
}
