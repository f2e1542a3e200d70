package queue_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/boltfile"
	"github.com/berth-ci/berth/jobsource"
)

// queue.db keeps the layout it had before the queue could live in etcd:
// the same buckets, 8-byte big-endian keys, sealed JSON values, index
// entries with empty or "resume" values, and the jobs bucket's sequence
// counting IDs. A berth upgraded in place reads its queue as it was.
func TestQueueDBLayoutIsUnchanged(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir)
	if _, err := q.Submit(api.JobRequest{Script: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(api.JobRequest{Script: "b", Resume: ""}); err != nil {
		t.Fatal(err)
	}
	j := request(t, q)
	if err := j.Finish(context.Background(), jobsource.Result{EnvKey: "env-1"}); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, "queue.db"), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var names []string
		_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names = append(names, string(name))
			return nil
		})
		sort.Strings(names)
		if got := strings.Join(names, ","); got != "env_owners,jobs,meta,queued,running,scripts" {
			t.Errorf("buckets = %s", got)
		}
		jobs := tx.Bucket([]byte("jobs"))
		if jobs.Sequence() != 2 {
			t.Errorf("jobs sequence = %d, want 2", jobs.Sequence())
		}
		for _, b := range []string{"jobs", "scripts"} {
			_ = tx.Bucket([]byte(b)).ForEach(func(k, v []byte) error {
				if len(k) != 8 || binary.BigEndian.Uint64(k) == 0 {
					t.Errorf("%s key %x is not an 8-byte big-endian ID", b, k)
				}
				if sealed, err := boltfile.Sealed(v); !sealed || err != nil {
					t.Errorf("%s value of %x is not sealed JSON: %q", b, k, v)
				}
				return nil
			})
		}
		if v := tx.Bucket([]byte("queued")).Get([]byte{0, 0, 0, 0, 0, 0, 0, 2}); v == nil || len(v) != 0 {
			t.Errorf("queued entry of job 2 = %q, want present and empty", v)
		}
		if k, _ := tx.Bucket([]byte("running")).Cursor().First(); k != nil {
			t.Errorf("running index still holds %x", k)
		}
		if v := tx.Bucket([]byte("env_owners")).Get([]byte("env-1")); v == nil || len(v) != 0 {
			t.Errorf("env owner of env-1 = %q, want the admin (empty)", v)
		}
		if v := tx.Bucket([]byte("meta")).Get([]byte("version")); string(v) != "1" {
			t.Errorf("meta version = %q", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
