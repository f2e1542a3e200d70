package queue

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/berth-ci/berth/internal/boltfile"
)

// LoseWithoutQueue says what starting without queue.db loses, for messages.
const LoseWithoutQueue = "every queued job, the results of finished ones and the environment keys they printed"

// checkFile refuses a damaged queue.db before bbolt opens it read-write:
// bbolt would initialise a 0-byte file as an empty queue, die with SIGBUS on
// a truncated one and panic on a damaged freelist (issue 9). Every record is
// decoded too. Damaged job records alone do not stop berth: the file's
// structure is sound, so Open sets those jobs aside (quarantine) and the
// others go on; it returns how many records are damaged.
func checkFile(path string) (damaged int, err error) {
	err = boltfile.Check(path, CheckRecord)
	if errors.Is(err, boltfile.ErrLocked) {
		return 0, fmt.Errorf("open queue %s: the database is locked by another process: is another `berth run` using the same state_dir?", path)
	}
	if recs := boltfile.Records(err); len(recs) > 0 {
		return len(recs), nil
	}
	if err != nil {
		// queue.db lives in STATE_DIR/queue/.
		return 0, boltfile.Refuse(err, filepath.Dir(filepath.Dir(path)), LoseWithoutQueue)
	}
	return 0, boltfile.Create(path)
}

// Backup writes the last good copy of the queue, queue.db.bak. Open writes
// one once the file passed its check, Close another, and the manager more
// in between (see `berth state restore`).
// It writes nothing when nothing changed since the last copy.
func (q *Queue) Backup() error {
	if err := q.st.backup(); err != nil {
		return q.storeError("back up the queue", err)
	}
	return nil
}
