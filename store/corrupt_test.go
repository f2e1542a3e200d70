package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/boltfile"
	"github.com/berth-ci/berth/scaler"
)

// parkedState saves a state holding one parked environment, closes the store
// (which writes state.db.bak) and returns the file's path.
func parkedState(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	st := scaler.State{Instances: []scaler.InstanceRecord{{ID: "i1", Phase: "suspended", Created: now}},
		Envs: []scaler.EnvRecord{{Key: "e1", InstanceID: "i1", State: []byte("saved"), ParkedAt: now}}}
	for i := range 40 { // enough instances for several pages
		st.Instances = append(st.Instances, scaler.InstanceRecord{ID: strings.Repeat("x", 200) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Phase: "ready", Created: now})
	}
	if err := b.Save(st); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Each way a state file is found damaged: berth refuses it before writing,
// names it, says what is wrong and how to get the last good copy back; the
// restore then brings back the parked environment.
func TestDamagedStateIsRefusedAndRestoredFromTheBackup(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, tc := range []struct {
		name   string
		damage func(path string)
		want   string
	}{
		{"0 bytes", func(p string) { os.Truncate(p, 0) }, "is empty (0 bytes)"},
		{"truncated to 10000 bytes", func(p string) { os.Truncate(p, 10000) }, "is truncated"},
		{"random meta pages", func(p string) { scribble(p, 0, 8192, r) }, "both meta pages are damaged"},
		{"random data pages", func(p string) {
			fi, _ := os.Stat(p)
			scribble(p, 8192, fi.Size()-8192, r)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := parkedState(t)
			tc.damage(path)
			before, _ := os.ReadFile(path)
			_, err := Open(path)
			var ce *boltfile.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("open a damaged state file: %v, want it refused as corrupt", err)
			}
			for _, want := range []string{path, tc.want, "has not written to it", "berth state restore", "state.db.bak", "parked environment"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("the refused file was written to")
			}

			aside, err := boltfile.Restore(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(aside); err != nil {
				t.Fatalf("the damaged file was not kept aside: %v", err)
			}
			b, err := Open(path)
			if err != nil {
				t.Fatalf("open after restore: %v", err)
			}
			defer b.Close()
			st, ok, err := b.Load()
			if err != nil || !ok || len(st.Envs) != 1 || string(st.Envs[0].State) != "saved" {
				t.Fatalf("after restore: ok=%v err=%v envs=%+v; want the parked environment back", ok, err, st.Envs)
			}
		})
	}
}

func scribble(path string, off, n int64, r *rand.Rand) {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt(b, off)
	f.Close()
}

func TestRestoreRefusesToReplaceAGoodFile(t *testing.T) {
	path := parkedState(t)
	if _, err := boltfile.Restore(path); err == nil || !strings.Contains(err.Error(), "passes the check") {
		t.Fatalf("restore over a good file: %v, want a refusal", err)
	}
}
