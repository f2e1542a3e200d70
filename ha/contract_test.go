package ha

import (
	"path/filepath"
	"testing"

	"github.com/berth-ci/berth/internal/storetest"
	"github.com/berth-ci/berth/store"
)

func TestContractBolt(t *testing.T) {
	paths := map[store.Store]string{}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store {
			path := filepath.Join(t.TempDir(), "state.db")
			b, err := store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			paths[b] = path
			return b
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := store.Open(paths[s])
			if err != nil {
				t.Fatal(err)
			}
			paths[b] = paths[s]
			return b
		},
	})
}

// The etcd store meets the same contract; a reopen is another manager
// taking over the prefix with a term of its own.
func TestContractEtcd(t *testing.T) {
	managers := map[store.Store]*manager{}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store {
			m := newManager(t, newPrefix(t), "a")
			m.lead(t)
			managers[m.store] = m
			return m.store
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			old := managers[s]
			if err := old.term.Resign(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			m := newManager(t, old.store.Prefix(), "b")
			m.lead(t)
			managers[m.store] = m
			return m.store
		},
	})
}
