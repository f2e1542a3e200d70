package queue

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berth-ci/berth/internal/boltfile"
)

// bucketQuarantine holds job records found damaged, set aside so that one
// bad record hides no other job and wedges no job loop (issue 19). The key
// is the job's key; the value a quarantined entry.
var bucketQuarantine = []byte("quarantine")

// quarantined is a damaged job set aside, with its raw bytes for a human.
type quarantined struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	Record []byte    `json:"record,omitempty"`
	Script []byte    `json:"script,omitempty"`
	// Kept names the copy of queue.db.bak made when the job was set
	// aside (quarantine.go): its last good record, for restore.
	Kept string `json:"kept,omitempty"`
}

// CheckRecord decodes one record of queue.db as the queue would, for
// boltfile.Check (`berth state check`, restore, and the check of each
// backup before it replaces queue.db.bak).
func CheckRecord(bucket, key, value []byte) error {
	if !bytes.Equal(bucket, bucketJobs) && !bytes.Equal(bucket, bucketScripts) {
		return nil
	}
	// A sealed record that matches its checksum is what berth wrote:
	// decoding it again would only cost time at every start and backup.
	if sealed, err := boltfile.Sealed(value); sealed {
		return err
	}
	switch {
	case bytes.Equal(bucket, bucketJobs):
		var rec record
		if err := decodeValue(value, &rec); err != nil {
			return err
		}
		if len(key) != 8 || rec.ID != fmt.Sprint(binary.BigEndian.Uint64(key)) {
			return fmt.Errorf("the record says it is job %q, not the job its key names", rec.ID)
		}
	case bytes.Equal(bucket, bucketScripts):
		var sc script
		return decodeValue(value, &sc)
	}
	return nil
}

func decodeValue(value []byte, dst any) error {
	v, err := boltfile.Unseal(value)
	if err != nil {
		return err
	}
	return json.Unmarshal(v, dst)
}

func encodeValue(tx tx, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if !tx.sealed() {
		return data, nil
	}
	return boltfile.Seal(data), nil
}

// quarantineDamaged moves every job whose record or script fails
// CheckRecord out of the jobs, scripts, queued and running buckets into
// the quarantine bucket, and returns their IDs with the reasons.
func quarantineDamaged(tx tx, kept string) (map[string]string, error) {
	bad := map[string]string{}
	for _, name := range [][]byte{bucketJobs, bucketScripts} {
		err := tx.scan(name, false, func(k, v []byte) (bool, error) {
			if err := CheckRecord(name, k, v); err != nil {
				id := jobID(k)
				if bad[id] == "" {
					bad[id] = fmt.Sprintf("its %s record is damaged: %v", name, err)
				}
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	now := time.Now().UTC()
	for id, why := range bad {
		k, ok := idKey(id)
		if !ok {
			k = []byte(id)
		}
		if err := quarantine(tx, k, why, kept, now); err != nil {
			return nil, err
		}
	}
	return bad, nil
}

// quarantine sets job k aside with the reason why.
func quarantine(tx tx, k []byte, why, kept string, now time.Time) error {
	e := quarantined{Reason: why, At: now, Kept: kept}
	var err error
	if e.Record, err = rawGet(tx, bucketJobs, k); err != nil {
		return err
	}
	if e.Script, err = rawGet(tx, bucketScripts, k); err != nil {
		return err
	}
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := tx.put(bucketQuarantine, k, v); err != nil {
		return err
	}
	for _, b := range [][]byte{bucketJobs, bucketScripts, bucketQueued, bucketRunning} {
		if err := tx.del(b, k); err != nil {
			return err
		}
	}
	return nil
}

// rawGet returns a copy of the bytes under k, damaged or not: a store that
// checks values on reading (etcd) hands them out with its error.
func rawGet(tx tx, bucket, k []byte) ([]byte, error) {
	v, err := tx.get(bucket, k)
	var ce *CorruptError
	if errors.As(err, &ce) {
		return bytes.Clone(ce.Value), nil
	}
	return bytes.Clone(v), err
}

// quarantineReason says why job k was quarantined, or "".
func quarantineReason(tx tx, k []byte) string {
	v, err := tx.get(bucketQuarantine, k)
	if err != nil || v == nil {
		return ""
	}
	var e quarantined
	if json.Unmarshal(v, &e) != nil {
		return "its record is damaged"
	}
	return e.Reason
}

func jobID(k []byte) string {
	if len(k) == 8 {
		return fmt.Sprint(binary.BigEndian.Uint64(k))
	}
	return fmt.Sprintf("%x", k)
}
