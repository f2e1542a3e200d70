package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/boltfile"
)

// A job set aside as damaged (records.go) keeps its last good record only
// in queue.db.bak, which the next backup (every few minutes, and at a
// clean stop) replaces with a copy that no longer holds the job: the job
// was gone from every listing, and `berth state check` said ok (issue
// 32). So when a job is set aside, queue.db.bak is first copied to
// queue.db.good-TIME, which berth never replaces or removes; the
// quarantine entry names it. `berth jobs quarantined` lists the entries,
// `berth state check` reports them, and `berth state restore-job ID` (with
// berth stopped) puts the job back from the kept copy.

// goodPrefix names the kept copies: queue.db.good-20260102T150405Z.
const goodPrefix = "queue.db.good-"

// keepGoodCopy copies queue.db.bak beside it once per start that set
// something aside, and returns the copy's name ("" without a copy or for
// etcd, which keeps no .bak: its snapshots are the copies).
func (q *Queue) keepGoodCopy() string {
	b, ok := q.st.(*boltBackend)
	if !ok {
		return ""
	}
	q.keptMu.Lock()
	defer q.keptMu.Unlock()
	if q.kept != "" {
		return q.kept
	}
	src := filepath.Join(b.dir, "queue.db"+boltfile.BackupSuffix)
	name := goodPrefix + time.Now().UTC().Format("20060102T150405Z")
	if err := copyFile(src, filepath.Join(b.dir, name)); err != nil {
		q.log.Error("cannot keep the last good copy of the queue for the job set aside; do not let berth back up the queue before copying queue.db.bak by hand", "err", err)
		return ""
	}
	q.kept = name
	return name
}

// copyFile copies src to dst (new) through dst.tmp and a rename, so that
// a crash never leaves a half copy under the kept name.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// sweepTemps removes what a berth killed in the middle of a write left in
// the queue directory: a half kept copy, a last-id being replaced, a
// health probe of the log directory (issue 32).
func sweepTemps(dir, logDir string, log interface{ Info(string, ...any) }) {
	var gone []string
	for _, pattern := range []string{
		filepath.Join(dir, goodPrefix+"*.tmp"),
		filepath.Join(dir, lastIDFile+".tmp"),
		filepath.Join(logDir, ".health-probe-*"),
	} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if os.Remove(m) == nil {
				gone = append(gone, filepath.Base(m))
			}
		}
	}
	if len(gone) > 0 {
		log.Info("removed files left by an interrupted write", "dir", dir, "files", gone)
	}
}

// Quarantined is a job set aside as damaged.
type Quarantined struct {
	// ID is the job's ID.
	ID string `json:"id"`
	// Reason says what was damaged.
	Reason string `json:"reason"`
	// At is when it was set aside.
	At time.Time `json:"at"`
	// Kept is the file holding its last good record ("" when none was kept).
	Kept string `json:"kept,omitempty"`
}

// QuarantinedList is the answer of GET /api/v1/jobs/quarantined.
type QuarantinedList struct {
	Jobs []Quarantined `json:"jobs"`
}

// Quarantined lists the jobs set aside, oldest first.
func (q *Queue) Quarantined() ([]Quarantined, error) {
	var out []Quarantined
	err := q.st.view(func(tx tx) error {
		return tx.scan(bucketQuarantine, false, func(k, v []byte) (bool, error) {
			out = append(out, quarantinedEntry(k, v))
			return true, nil
		})
	})
	return out, err
}

func quarantinedEntry(k, v []byte) Quarantined {
	var e quarantined
	if json.Unmarshal(v, &e) != nil {
		e.Reason = "its quarantine entry is damaged too"
	}
	return Quarantined{ID: jobID(k), Reason: e.Reason, At: e.At, Kept: e.Kept}
}

// ReadQuarantined lists the jobs set aside in the queue directory dir
// with berth stopped (`berth state check`), without writing to queue.db.
func ReadQuarantined(dir string) ([]Quarantined, error) {
	db, err := bolt.Open(filepath.Join(dir, "queue.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var out []Quarantined
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketQuarantine)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out = append(out, quarantinedEntry(k, v))
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, err
}

// RestoreQuarantined puts job id, set aside in the queue directory dir,
// back from the copy its entry names, with berth stopped. A job that was
// queued is queued again; one that was running when it was set aside is
// failed with a reason, since its run ended with that berth. It returns
// the restored job's state.
func RestoreQuarantined(dir, id string) (api.JobState, error) {
	k, ok := idKey(id)
	if !ok {
		return "", fmt.Errorf("%q is not a job ID", id)
	}
	db, err := bolt.Open(filepath.Join(dir, "queue.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return "", fmt.Errorf("open %s (stop berth first): %w", filepath.Join(dir, "queue.db"), err)
	}
	defer db.Close()
	var state api.JobState
	err = db.Update(func(btx *bolt.Tx) error {
		tx := boltTx{btx}
		v, err := tx.get(bucketQuarantine, k)
		if err != nil || v == nil {
			return fmt.Errorf("job %s is not quarantined (berth jobs quarantined lists those that are)", id)
		}
		var e quarantined
		if err := json.Unmarshal(v, &e); err != nil || e.Kept == "" {
			return fmt.Errorf("job %s has no kept copy to restore from: its last good record may still be in queue.db.bak (berth state restore puts the whole file back)", id)
		}
		rec, sc, err := readKept(filepath.Join(dir, e.Kept), k)
		if err != nil {
			return fmt.Errorf("restore job %s from %s: %w", id, e.Kept, err)
		}
		if rec.State == api.JobRunning {
			now := time.Now().UTC()
			rec.State, rec.FinishedAt, rec.Reason = api.JobFailed, &now, RestartReason
		}
		state = rec.State
		return putBack(tx, k, rec, sc)
	})
	return state, err
}

// readKept reads job k's record and script from a kept copy.
func readKept(path string, k []byte) (*record, *script, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	var rec *record
	var sc *script
	err = db.View(func(btx *bolt.Tx) error {
		tx := boltTx{btx}
		var err error
		if rec, err = loadRecord(tx, k); err != nil {
			return err
		}
		if rec == nil {
			return errors.New("the copy does not hold the job: it was set aside before the copy was written")
		}
		sc, err = loadScript(tx, k)
		return err
	})
	return rec, sc, err
}

// putBack writes a restored job and drops its quarantine entry.
func putBack(tx boltTx, k []byte, rec *record, sc *script) error {
	if err := saveRecord(tx, k, rec); err != nil {
		return err
	}
	if sc != nil {
		if err := saveScript(tx, k, sc); err != nil {
			return err
		}
	}
	if rec.State == api.JobQueued {
		var mark []byte
		if rec.Resume != "" {
			mark = queuedResume
		}
		if err := tx.put(bucketQueued, k, mark); err != nil {
			return err
		}
	}
	return tx.del(bucketQuarantine, k)
}

func (q *Queue) handleQuarantined(w http.ResponseWriter, r *http.Request) {
	if !api.PrincipalFrom(r.Context()).Admin {
		api.WriteError(w, http.StatusForbidden, "only the admin may list quarantined jobs: use the admin token (berth token)")
		return
	}
	jobs, err := q.Quarantined()
	if err != nil {
		q.writeError(w, q.storeError("list the quarantined jobs", err))
		return
	}
	if jobs == nil {
		jobs = []Quarantined{}
	}
	api.WriteJSON(w, http.StatusOK, QuarantinedList{Jobs: jobs})
}
