package queue

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Job IDs count up in queue.db. A queue.db put back from its last good copy,
// or moved aside, would count again from an older number, and new jobs
// would take the IDs (and log files) of jobs already run: a new submitter
// saw an earlier job's output (issue 19). The highest ID ever issued is
// therefore also kept beside queue.db, in lastIDFile, and Open starts the
// count above it and above every log file's number. A log file found for a
// new ID is stale and removed, so a log never belongs to two jobs.

// lastIDFile holds the highest job ID issued, in decimal.
const lastIDFile = "last-id"

// idFloor returns the highest job ID this directory has seen outside
// queue.db: lastIDFile and the names of the log files.
func (q *Queue) idFloor() uint64 {
	var floor uint64
	if b, err := os.ReadFile(filepath.Join(q.dir, lastIDFile)); err == nil {
		floor, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	entries, err := os.ReadDir(q.logDir)
	if err != nil {
		return floor
	}
	for _, e := range entries {
		if n, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".log"), 10, 64); err == nil && n > floor {
			floor = n
		}
	}
	return floor
}

// issued is called in the submit transaction with the new job's ID. It
// removes a stale log file of that number, which must be gone before the
// job is visible, and notes the ID for saveIssued. It does not write
// lastIDFile itself: the submit transaction runs under queue.db's single
// writer, and a file written and renamed per job there was the serial step
// of a burst of submits (0.2 ms per job, three quarters of the submit
// path's CPU; issue 23).
func (q *Queue) issued(id uint64) {
	name := strconv.FormatUint(id, 10)
	if err := os.Remove(q.logPath(name)); err == nil {
		q.log.Warn("removed a stale log file left by an earlier job with the same number", "job", name)
	}
	q.idMu.Lock()
	q.issuedID = max(q.issuedID, id)
	q.idMu.Unlock()
}

// saveIssued raises lastIDFile to the highest ID issued, once the submit
// committed and before the submitter is answered: a job anyone was told
// about is recorded. The submits that shared a commit share this write
// too. The file is written through a rename (a crash leaves the old or
// the new number) and not synced: it must survive berth's crash, which
// the page cache does; a write lost to a crash of the host, or to berth's
// crash between the commit and this write, costs only the floor the log
// files give anyway.
func (q *Queue) saveIssued() {
	q.idMu.Lock()
	defer q.idMu.Unlock()
	id := q.issuedID
	if id <= q.lastID {
		return
	}
	name := strconv.FormatUint(id, 10)
	tmp := filepath.Join(q.dir, lastIDFile+".tmp")
	err := os.WriteFile(tmp, []byte(name+"\n"), 0o600)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(q.dir, lastIDFile))
	}
	if err != nil {
		q.log.Warn("cannot record the last job ID; after a restore of queue.db the log files still keep IDs from repeating", "err", fmt.Errorf("write %s: %w", lastIDFile, err))
		return
	}
	q.lastID = id
}
