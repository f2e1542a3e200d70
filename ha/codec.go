package ha

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-ci/berth/scaler"
)

// Keys relative to the prefix (see doc.go).
const (
	keySaved        = "meta/saved"
	keyPending      = "state/pending"
	keyArrivals     = "state/arrivals"
	keyLearned      = "state/learned"
	dirInstances    = "state/instances/"
	dirReservations = "state/reservations/"
	dirEnvs         = "state/environments/"
)

// CorruptError is a value in etcd berth cannot use. Callers refuse to
// start from it rather than forget instances or environments.
type CorruptError struct {
	// Key is the full etcd key.
	Key string
	// Err says what is wrong with its value.
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("etcd key %q holds a value berth cannot use: %v; berth refuses to start from it rather than forget instances or parked environments: "+
		"fix or delete the key (etcdctl get/del %q), then start again (deleting an instance's key makes its instance adopted or deleted by autoscaler.unknown_instances)",
		e.Key, e.Err, e.Key)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// encode renders st as the keys and values a Save wants in etcd.
func (s *Store) encode(st scaler.State) (map[string]string, error) {
	m := map[string]string{s.key(keySaved): "1"}
	put := func(rel string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", rel, err)
		}
		m[s.key(rel)] = string(data)
		return nil
	}
	pending := st.Pending
	if pending == nil {
		pending = []time.Time{} // "null" is refused on load
	}
	if err := put(keyPending, pending); err != nil {
		return nil, err
	}
	if st.Arrivals != nil {
		if st.Arrivals != s.lastArrivals {
			data, err := json.Marshal(st.Arrivals)
			if err != nil {
				return nil, fmt.Errorf("encode arrival model: %w", err)
			}
			s.lastArrivals, s.arrivalsJSON = st.Arrivals, string(data)
		}
		m[s.key(keyArrivals)] = s.arrivalsJSON
	}
	if st.Learned != nil {
		if st.Learned != s.lastLearned {
			data, err := json.Marshal(st.Learned)
			if err != nil {
				return nil, fmt.Errorf("encode learned state: %w", err)
			}
			s.lastLearned, s.learnedJSON = st.Learned, string(data)
		}
		m[s.key(keyLearned)] = s.learnedJSON
	}
	for _, r := range st.Instances {
		if err := put(dirInstances+r.ID, r); err != nil {
			return nil, err
		}
	}
	for _, r := range st.Reservations {
		if err := put(dirReservations+r.Key, r); err != nil {
			return nil, err
		}
	}
	for _, r := range st.Envs {
		if err := put(dirEnvs+r.Key, r); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// decodeInto adds the value of one key under state/ to st. A value must be
// valid JSON of its kind, and a record must carry the name it is stored
// under: a mismatch means a hand edit or a foreign writer, not berth.
func (s *Store) decodeInto(st *scaler.State, key string, value []byte) error {
	rel := strings.TrimPrefix(key, s.prefix)
	bad := func(err error) error { return &CorruptError{Key: key, Err: err} }
	named := func(name, field string) error {
		if name != field {
			return bad(fmt.Errorf("the record names %q, not %q as its key does", field, name))
		}
		return nil
	}
	switch {
	case rel == keyPending:
		var p []time.Time
		if err := strictJSON(value, &p); err != nil {
			return bad(err)
		}
		st.Pending = p
	case rel == keyArrivals:
		st.Arrivals = new(scaler.ArrivalModel)
		if err := strictJSON(value, st.Arrivals); err != nil {
			return bad(err)
		}
	case rel == keyLearned:
		st.Learned = new(scaler.Learned)
		if err := strictJSON(value, st.Learned); err != nil {
			return bad(err)
		}
	case strings.HasPrefix(rel, dirInstances):
		var r scaler.InstanceRecord
		if err := strictJSON(value, &r); err != nil {
			return bad(err)
		}
		if err := named(strings.TrimPrefix(rel, dirInstances), r.ID); err != nil {
			return err
		}
		st.Instances = append(st.Instances, r)
	case strings.HasPrefix(rel, dirReservations):
		var r scaler.ReservationRecord
		if err := strictJSON(value, &r); err != nil {
			return bad(err)
		}
		if err := named(strings.TrimPrefix(rel, dirReservations), r.Key); err != nil {
			return err
		}
		st.Reservations = append(st.Reservations, r)
	case strings.HasPrefix(rel, dirEnvs):
		var r scaler.EnvRecord
		if err := strictJSON(value, &r); err != nil {
			return bad(err)
		}
		if err := named(strings.TrimPrefix(rel, dirEnvs), r.Key); err != nil {
			return err
		}
		st.Envs = append(st.Envs, r)
	default:
		return bad(errors.New("berth does not write this key; it is not part of the state layout in the ha package's documentation"))
	}
	return nil
}

// strictJSON decodes one JSON value and nothing after it. A value that is
// "null" or empty is refused: berth never writes one.
func strictJSON(data []byte, v any) error {
	s := strings.TrimSpace(string(data))
	if s == "" || s == "null" {
		return errors.New("the value is empty")
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if dec.More() {
		return errors.New("not valid JSON: data after the value")
	}
	return nil
}
