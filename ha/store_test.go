package ha

import (
	"testing"
)

// A Save sends only what changed: a booking that acquires its slot is
// one key in one transaction, and an unchanged state is no write at all.
func TestSaveWritesOnlyWhatChanged(t *testing.T) {
	m := newManager(t, newPrefix(t), "a")
	m.lead(t)
	st := fleetState()
	if err := m.store.Save(st); err != nil {
		t.Fatal(err)
	}
	first := m.store.Stats()
	if first.Txns != 1 || first.Puts != int64(len(st.Instances)+len(st.Reservations)+2) {
		t.Fatalf("first save: %+v, want one transaction putting every record, pending and meta/saved", first)
	}
	if err := m.store.Save(st); err != nil {
		t.Fatal(err)
	}
	if got := m.store.Stats(); got != first {
		t.Fatalf("saving the same state wrote %+v", got)
	}
	st.Reservations[3].Acquired = true
	st.Reservations = append(st.Reservations[:5], st.Reservations[6:]...)
	if err := m.store.Save(st); err != nil {
		t.Fatal(err)
	}
	got := m.store.Stats()
	if got.Txns != 2 || got.Puts != first.Puts+1 || got.Deletes != 1 {
		t.Fatalf("after one acquire and one release: %+v, want one more transaction with one put and one delete", got)
	}
	loaded, _, err := m.store.Load()
	if err != nil || len(loaded.Reservations) != len(st.Reservations) {
		t.Fatalf("load: %d reservations, %v", len(loaded.Reservations), err)
	}
}
