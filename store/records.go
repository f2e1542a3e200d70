package store

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/berth-ci/berth/internal/boltfile"
	"github.com/berth-ci/berth/scaler"
)

// CheckRecord decodes one record of state.db as Load would, for
// boltfile.Check: berth must find a damaged record before it writes to the
// file or replaces its last good copy (issue 19).
func CheckRecord(bucket, key, value []byte) error {
	var dst any
	switch {
	case bytes.Equal(bucket, bucketInstances):
		dst = new(scaler.InstanceRecord)
	case bytes.Equal(bucket, bucketReservations):
		dst = new(scaler.ReservationRecord)
	case bytes.Equal(bucket, bucketEnvs):
		dst = new(scaler.EnvRecord)
	case bytes.Equal(bucket, bucketMeta) && bytes.Equal(key, keyPending):
		dst = new([]time.Time)
	case bytes.Equal(bucket, bucketMeta) && bytes.Equal(key, keyArrivals):
		dst = new(scaler.ArrivalModel)
	default:
		return nil
	}
	// A sealed record that matches its checksum is what berth wrote.
	if sealed, err := boltfile.Sealed(value); sealed {
		return err
	}
	return decode(value, dst)
}

// decode verifies a sealed record and decodes it.
func decode(value []byte, dst any) error {
	v, err := boltfile.Unseal(value)
	if err != nil {
		return err
	}
	return json.Unmarshal(v, dst)
}

// encode marshals a record and seals it with its checksum.
func encode(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return boltfile.Seal(data), nil
}
