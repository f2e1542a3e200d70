package queue

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-ci/berth/api"
)

// PageEntry names one job of a listing's page: enough to order it among
// other sources' jobs (the manager merges GitLab's) before it is loaded.
type PageEntry struct {
	ID        string
	CreatedAt time.Time
	key       []byte
}

// Page finds the page of p's jobs (all for the admin) in state ("" for
// any) listed before cursor ("" for the newest): at most limit entries,
// newest first, and whether older ones remain. Only the entries are
// held, not the jobs: Load reads them a few at a time. A cursor that is
// not a job ID is an error wrapping ErrBadCursor.
func (q *Queue) Page(p api.Principal, state api.JobState, limit int, cursor string) ([]PageEntry, bool, error) {
	var before []byte
	if cursor != "" {
		k, ok := idKey(cursor)
		if !ok {
			return nil, false, fmt.Errorf("cursor %q: %w", cursor, ErrBadCursor)
		}
		before = k
	}
	var out []PageEntry
	more := false
	err := q.st.view(func(tx tx) error {
		out, more = out[:0], false
		return tx.scan(bucketJobs, true, func(k, v []byte) (bool, error) {
			if before != nil && bytes.Compare(k, before) >= 0 {
				return true, nil // on a later page's side of the cursor
			}
			var rec record
			if err := decodeValue(v, &rec); err != nil {
				q.log.Warn("skipping a damaged job record in the list", "job", jobID(k), "err", err)
				return true, nil
			}
			if (state != "" && rec.State != state) || !p.Owns(rec.Owner) {
				return true, nil
			}
			if len(out) == limit {
				more = true
				return false, nil
			}
			out = append(out, PageEntry{ID: rec.ID, CreatedAt: rec.CreatedAt, key: bytes.Clone(k)})
			return true, nil
		})
	})
	if err != nil {
		if q.st.closed(err) {
			return nil, false, ErrClosed
		}
		return nil, false, fmt.Errorf("list jobs: %w", err)
	}
	return out, more, nil
}

// ErrBadCursor is a listing's cursor that no page of this queue gave.
var ErrBadCursor = errors.New("not a cursor of this job list: pass the \"next\" of the previous page, or none for the newest jobs")

// loadChunk bounds the jobs a Loader holds (and a read transaction
// reads) at once.
const loadChunk = 64

// Loader reads the jobs of a page's entries in the order given, a chunk
// at a time, each as List shows it (script cut to ListScriptBytes, why a
// queued job waits). A job pruned since the page was found is skipped.
type Loader struct {
	q       *Queue
	entries []PageEntry
	buf     []api.Job
}

// Load returns a Loader for entries.
func (q *Queue) Load(entries []PageEntry) *Loader { return &Loader{q: q, entries: entries} }

// Next returns the next job, false when none is left.
func (l *Loader) Next() (api.Job, bool, error) {
	for len(l.buf) == 0 {
		if len(l.entries) == 0 {
			return api.Job{}, false, nil
		}
		chunk := l.entries[:min(loadChunk, len(l.entries))]
		l.entries = l.entries[len(chunk):]
		if err := l.fill(chunk); err != nil {
			return api.Job{}, false, err
		}
	}
	j := l.buf[0]
	l.buf = l.buf[1:]
	return j, true, nil
}

func (l *Loader) fill(chunk []PageEntry) error {
	q := l.q
	err := q.st.view(func(tx tx) error {
		l.buf = l.buf[:0]
		for _, e := range chunk {
			rec, err := loadRecord(tx, e.key)
			var re *readError
			if errors.As(err, &re) {
				return err
			}
			if err != nil || rec == nil {
				continue // damaged since, or pruned: Open quarantines the first
			}
			sc, err := loadScript(tx, e.key)
			if errors.As(err, &re) {
				return err
			}
			if err != nil {
				q.log.Warn("skipping a job with a damaged script in the list", "job", rec.ID, "err", err)
				continue
			}
			l.buf = append(l.buf, rec.apiJob(cutScript(sc)))
		}
		return nil
	})
	if err != nil {
		if q.st.closed(err) {
			return ErrClosed
		}
		return fmt.Errorf("list jobs: %w", err)
	}
	for i := range l.buf {
		q.explainWait(&l.buf[i])
	}
	return nil
}

// cutScript cuts a script to ListScriptBytes for a listing.
func cutScript(sc *script) *script {
	if sc == nil || len(sc.Script) <= ListScriptBytes {
		return sc
	}
	cut := *sc
	cut.Script = strings.ToValidUTF8(sc.Script[:ListScriptBytes], "") + "..."
	return &cut
}
