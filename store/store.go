// Package store keeps berth's durable state: instances, reservations,
// acquisitions, suspended environments with their saved state, and pending
// increases (intents recorded before provider calls).
//
// Bolt, backed by a bbolt file, is the default. A distributed backend
// implements the same Store interface.
package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/berth-ci/berth/internal/boltfile"
	"github.com/berth-ci/berth/internal/diskfull"
	"github.com/berth-ci/berth/scaler"
)

// Store loads and saves the core's durable state.
type Store interface {
	// ID identifies this state; environment keys carry it so that a key from
	// another berth state is refused.
	ID() string
	// Load returns the saved state, or ok=false when nothing was saved yet.
	Load() (st scaler.State, ok bool, err error)
	// Save replaces the saved state atomically.
	Save(st scaler.State) error
	// Close releases the store.
	Close() error
}

var (
	bucketMeta         = []byte("meta")
	bucketInstances    = []byte("instances")
	bucketReservations = []byte("reservations")
	bucketEnvs         = []byte("environments")
	keyID              = []byte("id")
	keyVersion         = []byte("version")
	keyPending         = []byte("pending")
	keySaved           = []byte("saved")
	// keyArrivals holds the core's learned arrival pattern (scaler.ArrivalModel).
	keyArrivals = []byte("arrivals")
	// keyLearned holds what the core learned beyond it (scaler.Learned).
	keyLearned    = []byte("learned")
	schemaVersion = []byte("1")
)

// ErrLocked is returned by Open when another process holds the file.
var ErrLocked = errors.New("state file is locked by another berth process")

// Bolt is a Store in a bbolt file.
type Bolt struct {
	db     *bolt.DB
	path   string
	id     string
	backup *boltfile.Backer
	// lastArrivals is the arrival model written last; the core hands the
	// same pointer until the model changes.
	lastArrivals *scaler.ArrivalModel
	// lastLearned is the learned state written last, likewise.
	lastLearned *scaler.Learned
	// written holds the instance and booking records the last committed
	// Save wrote, by bucket and key, so that an unchanged one is neither
	// marshalled nor written again; nil after a failed Save.
	written map[string]any
}

// Open opens or creates the state file at path. An unreadable or corrupt
// file is an error: berth must not start empty and forget its instances.
func Open(path string) (*Bolt, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create state directory for %s: %w", path, err)
	}
	// Look before bbolt writes: opened read-write, bbolt initialises a
	// 0-byte file as empty, dies with SIGBUS on a truncated one and panics
	// on a damaged freelist, after writing to it (issue 9).
	// Every record is decoded too: a damaged one found only by Load would
	// come after this start wrote the file and replaced state.db.bak.
	if err := boltfile.Check(path, CheckRecord); errors.Is(err, boltfile.ErrLocked) {
		return nil, fmt.Errorf("open state file %s: %w; stop the other berth or use another --state-dir", path, ErrLocked)
	} else if err != nil {
		return nil, boltfile.Refuse(err, filepath.Dir(path), LoseWithoutState)
	}
	if err := boltfile.Create(path); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open state file %s: %w; stop the other berth or use another --state-dir", path, ErrLocked)
	}
	if err != nil {
		return nil, openError(path, err)
	}
	b := &Bolt{db: db, path: path, backup: boltfile.NewBacker(db, path, CheckRecord)}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(keyVersion); v != nil && string(v) != string(schemaVersion) {
			return fmt.Errorf("schema version %q, this berth understands %q", v, schemaVersion)
		}
		if id := meta.Get(keyID); id != nil {
			b.id = string(id)
			return nil
		}
		if tx.Bucket(bucketInstances) != nil {
			return errors.New("the state has instances but no id")
		}
		var raw [8]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return err
		}
		b.id = hex.EncodeToString(raw[:])
		if err := meta.Put(keyVersion, schemaVersion); err != nil {
			return err
		}
		return meta.Put(keyID, []byte(b.id))
	})
	if err != nil {
		db.Close()
		return nil, openError(path, err)
	}
	// The file just passed the check: keep it as the last good copy.
	if err := b.Backup(); err != nil {
		db.Close()
		return nil, openError(path, err)
	}
	return b, nil
}

// LoseWithoutState says what starting without state.db loses, for messages.
const LoseWithoutState = "the instances berth created (they would be adopted or deleted by autoscaler.unknown_instances) and every parked environment"

// Backup writes the last good copy, state.db.bak (see `berth state restore`).
// It writes nothing when nothing changed since the last copy.
func (b *Bolt) Backup() error { return b.backup.Backup() }

// openError explains a failure to open or initialise the state file. A full
// disk is said to be one, with where: it is not damage, and nothing is lost.
func openError(path string, err error) error {
	if full := diskfull.Explain(filepath.Dir(path), err); full != nil {
		return full
	}
	return corrupt(path, err)
}

func corrupt(path string, err error) error {
	return fmt.Errorf("state file %s is unreadable: %w; berth refuses to start rather than forget its instances and suspended environments: restore the file from a backup, or move it aside to start with an empty state (listed instances are then adopted or deleted by autoscaler.unknown_instances)", path, err)
}

// ID returns the state's identity.
func (b *Bolt) ID() string { return b.id }

// Path returns the file's path.
func (b *Bolt) Path() string { return b.path }

// Load returns the saved state.
func (b *Bolt) Load() (scaler.State, bool, error) {
	var st scaler.State
	var ok bool
	err := b.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keySaved) == nil {
			return nil
		}
		ok = true
		if v := meta.Get(keyPending); v != nil {
			if err := decode(v, &st.Pending); err != nil {
				return fmt.Errorf("pending increases: %w", err)
			}
		}
		if v := meta.Get(keyArrivals); v != nil {
			st.Arrivals = new(scaler.ArrivalModel)
			if err := decode(v, st.Arrivals); err != nil {
				return fmt.Errorf("arrival model: %w", err)
			}
		}
		if v := meta.Get(keyLearned); v != nil {
			st.Learned = new(scaler.Learned)
			if err := decode(v, st.Learned); err != nil {
				return fmt.Errorf("learned state: %w", err)
			}
		}
		if err := each(tx, bucketInstances, func(v []byte) error {
			var r scaler.InstanceRecord
			err := decode(v, &r)
			st.Instances = append(st.Instances, r)
			return err
		}); err != nil {
			return err
		}
		if err := each(tx, bucketReservations, func(v []byte) error {
			var r scaler.ReservationRecord
			err := decode(v, &r)
			st.Reservations = append(st.Reservations, r)
			return err
		}); err != nil {
			return err
		}
		return each(tx, bucketEnvs, func(v []byte) error {
			var r scaler.EnvRecord
			err := decode(v, &r)
			st.Envs = append(st.Envs, r)
			return err
		})
	})
	if err != nil {
		return scaler.State{}, false, corrupt(b.path, err)
	}
	return st, ok, nil
}

func each(tx *bolt.Tx, name []byte, fn func(v []byte) error) error {
	bk := tx.Bucket(name)
	if bk == nil {
		return nil
	}
	return bk.ForEach(func(k, v []byte) error {
		if err := fn(v); err != nil {
			return fmt.Errorf("%s/%s: %w", name, k, err)
		}
		return nil
	})
}

// Save replaces the saved state in one transaction.
func (b *Bolt) Save(st scaler.State) error {
	var saved *scaler.ArrivalModel
	var learned *scaler.Learned
	w := &writer{last: b.written, next: make(map[string]any, len(st.Instances)+len(st.Reservations))}
	err := b.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		pending, err := encode(st.Pending)
		if err != nil {
			return err
		}
		if err := meta.Put(keyPending, pending); err != nil {
			return err
		}
		// The arrival model changes every 15 minutes, the state on every
		// event: write it only when the core handed over a new snapshot.
		if st.Arrivals != nil && st.Arrivals != b.lastArrivals {
			arr, err := encode(st.Arrivals)
			if err != nil {
				return err
			}
			if err := meta.Put(keyArrivals, arr); err != nil {
				return err
			}
			saved = st.Arrivals
		}
		// The learned state likewise: a new snapshot at most once a minute.
		if st.Learned != nil && st.Learned != b.lastLearned {
			data, err := encode(st.Learned)
			if err != nil {
				return err
			}
			if err := meta.Put(keyLearned, data); err != nil {
				return err
			}
			learned = st.Learned
		}
		if err := meta.Put(keySaved, []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
			return err
		}
		if err := w.replace(tx, bucketInstances, len(st.Instances), func(i int) (string, any) {
			return st.Instances[i].ID, st.Instances[i]
		}); err != nil {
			return err
		}
		if err := w.replace(tx, bucketReservations, len(st.Reservations), func(i int) (string, any) {
			return st.Reservations[i].Key, st.Reservations[i]
		}); err != nil {
			return err
		}
		return w.replace(tx, bucketEnvs, len(st.Envs), func(i int) (string, any) {
			return st.Envs[i].Key, st.Envs[i]
		})
	})
	if err != nil {
		b.written = nil
		return fmt.Errorf("save state to %s: %w (is the disk full?)", b.path, err)
	}
	if saved != nil {
		b.lastArrivals = saved
	}
	if learned != nil {
		b.lastLearned = learned
	}
	b.written = w.next
	return nil
}

// writer writes one Save's buckets, skipping records the last Save wrote
// unchanged.
type writer struct {
	last, next map[string]any
}

// replace makes bucket name hold exactly the n items. It writes only the
// entries that changed and deletes the ones that are gone: the state is
// saved on every booking, and rewriting (and marshalling) every instance and
// booking each time made a burst of N bookings cost O(N²) of both.
func (w *writer) replace(tx *bolt.Tx, name []byte, n int, item func(i int) (string, any)) error {
	bk, err := tx.CreateBucketIfNotExists(name)
	if err != nil {
		return err
	}
	keep := make(map[string]bool, n)
	for i := range n {
		k, v := item(i)
		keep[k] = true
		if w.unchanged(string(name)+"/"+k, v) {
			continue
		}
		data, err := encode(v)
		if err != nil {
			return err
		}
		if old := bk.Get([]byte(k)); old != nil && bytes.Equal(old, data) {
			continue
		}
		if err := bk.Put([]byte(k), data); err != nil {
			return err
		}
	}
	var gone [][]byte
	c := bk.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if !keep[string(k)] {
			gone = append(gone, append([]byte(nil), k...))
		}
	}
	for _, k := range gone {
		if err := bk.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// unchanged reports whether the last committed Save wrote v under key, and
// remembers v for the next Save. Only records that Go can compare with ==
// are remembered (an environment's state is a byte slice).
func (w *writer) unchanged(key string, v any) bool {
	switch v.(type) {
	case scaler.InstanceRecord, scaler.ReservationRecord:
	default:
		return false
	}
	w.next[key] = v
	last, ok := w.last[key]
	return ok && last == v
}

// Close writes the last good copy and closes the file.
func (b *Bolt) Close() error {
	berr := b.Backup()
	if err := b.db.Close(); err != nil {
		return err
	}
	return berr
}
