package store

import (
	"errors"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/berth-ci/berth/internal/boltfile"
)

// PeekID returns the identity of the state file at path without writing
// to it (Open writes: a backup, an identity for a new file), "" when the
// file does not exist or has none. A manager compares it with the fleet
// it recorded before opening the file, so that a state.db replaced by
// another (or moved aside) is refused before it replaces state.db.bak.
func PeekID(path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	// bbolt dies with SIGBUS on a truncated file and panics on a damaged
	// freelist: only a file that passes the check is opened. A damaged
	// one is Open's to refuse, with its own advice.
	if err := boltfile.Check(path); err != nil {
		return "", err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return "", err
	}
	defer db.Close()
	var id string
	err = db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			id = string(meta.Get(keyID))
		}
		return nil
	})
	return id, err
}
