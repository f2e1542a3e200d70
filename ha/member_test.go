package ha

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/etcdtest"
)

// One member of three stops (here the first, the one a client tries
// first): the cluster keeps its quorum, the client moves to another
// member, and the leader keeps its term and goes on saving.
func TestLeaderSurvivesTheLossOfOneMember(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own etcd cluster")
	}
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	s, err := OpenStore(testCtx(t), cli, "/berth/")
	if err != nil {
		t.Fatal(err)
	}
	// A lease comfortably longer than a raft election on a loaded machine.
	el := NewElector(cli, "/berth/", 5*time.Second, "a", quiet())
	term, err := el.Campaign(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	s.SetFence(term.Fence())
	if err := s.Save(instances("i1")); err != nil {
		t.Fatal(err)
	}
	c.StopMember(0)
	// A write in flight when the member goes, or during the raft election
	// that follows when it led, fails (etcd does not retry a transaction
	// that may have been applied); the fleet saves again, and so does this.
	var err2 error
	for range 20 {
		if err2 = s.Save(instances("i1", "i2")); err2 == nil {
			break
		}
		t.Logf("save with two members of three: %v; again", err2)
		time.Sleep(250 * time.Millisecond)
	}
	if err2 != nil {
		t.Fatalf("save with two members of three: %v", err2)
	}
	if el.Role() != RoleLeader || term.Context().Err() != nil {
		t.Fatalf("the term ended with two members of three up: %v", term.Context().Err())
	}
	// The load is a plain read, which the client retries by itself.
	got, _, err := s.Load()
	if err != nil || len(got.Instances) != 2 {
		t.Fatalf("load: %+v, %v", got.Instances, err)
	}
}
