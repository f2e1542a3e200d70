package etcdtest

import (
	"fmt"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// member is one running etcd server of a Cluster.
type member interface {
	// ready returns once the member serves (its cluster has a leader), or
	// with an error when it failed or deadline came first.
	ready(deadline <-chan time.Time) error
	// Close stops the member and returns once it stopped.
	Close()
}

// embedded is a member running inside the test process.
type embedded struct{ e *embed.Etcd }

func (m embedded) ready(deadline <-chan time.Time) error {
	select {
	case <-m.e.Server.ReadyNotify():
		return nil
	case err := <-m.e.Err():
		return err
	case <-deadline:
		return fmt.Errorf("not ready after %s", startTimeout)
	}
}

func (m embedded) Close() { m.e.Close() }
