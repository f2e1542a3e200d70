package manager

import (
	"context"
	"fmt"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/store"
)

// stateStore is what the manager needs of the fleet's durable state: the
// bbolt file of a single manager, or etcd under [ha].
type stateStore interface {
	store.Store
	// Where names the state in messages: the file, or etcd and the prefix.
	Where() string
	// Backup rewrites the last good copy where the backend keeps one.
	Backup() error
}

// boltState is the state file of a single manager.
type boltState struct{ *store.Bolt }

func (b boltState) Where() string { return b.Path() }

// etcdState is the state shared by the managers of [ha].
type etcdState struct{ *ha.Store }

func (e etcdState) Where() string { return "etcd under " + e.Prefix() }

// Backup does nothing: etcd keeps the state on every member, and its
// snapshots (etcdctl snapshot save) are the copy to keep (docs/ha.md).
func (etcdState) Backup() error { return nil }

// openBolt opens state.db in the state directory; its host-key records
// serve provider plugins too.
func (m *Manager) openBolt() error {
	path := filepath.Join(m.cfg.StateDir, "state.db")
	known, err := knownFleet(m.cfg.StateDir, StateIDFile)
	if err != nil {
		return err
	}
	if err := checkBoltFleet(path, known); err != nil {
		return err
	}
	b, err := store.Open(path)
	if err != nil {
		return err
	}
	if known == "" {
		if err := RecordFleet(m.cfg.StateDir, StateIDFile, b.ID()); err != nil {
			b.Close()
			return err
		}
	}
	m.store, m.hostKeys = boltState{b}, b
	return nil
}

// etcdHostKeys records the host keys a provider plugin cannot report in
// etcd under <prefix>hostkeys/<group>/<id>, next to the state: the next
// leader must trust the same keys the first one saw (trust on first use
// is per fleet, not per manager).
type etcdHostKeys struct {
	cli    *clientv3.Client
	prefix string
}

func (k etcdHostKeys) key(group, id string) string {
	return k.prefix + "hostkeys/" + group + "/" + id
}

// HostKey returns the recorded key, or "" if there is none.
func (k etcdHostKeys) HostKey(group, id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ha.DefaultOpTimeout)
	defer cancel()
	resp, err := k.cli.Get(ctx, k.key(group, id))
	if err != nil {
		return "", fmt.Errorf("read the host key of %s from etcd: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// PutHostKey records key for the instance.
func (k etcdHostKeys) PutHostKey(group, id, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), ha.DefaultOpTimeout)
	defer cancel()
	if _, err := k.cli.Put(ctx, k.key(group, id), key); err != nil {
		return fmt.Errorf("record the host key of %s in etcd: %w", id, err)
	}
	return nil
}

// ForgetHostKey drops the record of a deleted instance.
func (k etcdHostKeys) ForgetHostKey(group, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), ha.DefaultOpTimeout)
	defer cancel()
	if _, err := k.cli.Delete(ctx, k.key(group, id)); err != nil {
		return fmt.Errorf("forget the host key of %s in etcd: %w", id, err)
	}
	return nil
}
