package ha

import (
	"errors"
	"strings"
	"testing"
)

// A value berth cannot use is refused with its key, whatever is wrong
// with it; berth does not start from a state it would misread.
func TestCorruptValueIsRefusedWithItsKey(t *testing.T) {
	for _, tc := range []struct {
		name, key, value, want string
	}{
		{"not JSON", "state/instances/i1", "{\"id\":\"i1\",", "not valid JSON"},
		{"wrong type", "state/instances/i1", `{"id":"i1","use_count":"three"}`, "not valid JSON"},
		{"trailing data", "state/reservations/k1", `{"key":"k1"} {"key":"k2"}`, "data after the value"},
		{"empty", "state/environments/e1", "", "empty"},
		{"null", "state/pending", "null", "empty"},
		{"record under another name", "state/instances/i1", `{"id":"i2","phase":"ready"}`, `names "i2", not "i1"`},
		{"key berth never writes", "state/surprise", `{}`, "does not write this key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, newPrefix(t), "a")
			m.lead(t)
			if err := m.store.Save(instances("i0")); err != nil {
				t.Fatal(err)
			}
			key := m.store.Prefix() + tc.key
			if _, err := m.cli.Put(testCtx(t), key, tc.value); err != nil {
				t.Fatal(err)
			}
			_, ok, err := m.store.Load()
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Key != key {
				t.Fatalf("load: ok=%v err=%v, want a CorruptError for %s", ok, err, key)
			}
			for _, want := range []string{key, tc.want, "etcdctl", "refuses to start"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

// A prefix written by a berth with another key layout is refused at open.
func TestUnknownLayoutIsRefused(t *testing.T) {
	p := newPrefix(t)
	m := newManager(t, p, "a")
	if _, err := m.cli.Put(testCtx(t), p+"meta/version", "99"); err != nil {
		t.Fatal(err)
	}
	_, err := OpenStore(testCtx(t), m.cli, p)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Key != p+"meta/version" {
		t.Fatalf("open: %v, want a CorruptError for the version key", err)
	}
}

// Managers opening a new prefix at once agree on one state identity.
func TestManagersAgreeOnTheStateID(t *testing.T) {
	p := newPrefix(t)
	ids := make(chan string, 4)
	for range 4 {
		go func() {
			s, err := OpenStore(testCtx(t), client(t), p)
			if err != nil {
				t.Error(err)
				ids <- ""
				return
			}
			ids <- s.ID()
		}()
	}
	first := <-ids
	for range 3 {
		if id := <-ids; id != first || id == "" {
			t.Fatalf("state ids %q and %q", first, id)
		}
	}
}
