package store

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/boltfile"
)

// changeByte changes the first byte of what in the file at path, as a
// damaged sector or a stray write would, and fails the test if what is not
// there.
func changeByte(t *testing.T, path, what string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(what))
	if i < 0 {
		t.Fatalf("%s does not hold %q", path, what)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{data[i] + 1}, int64(i)); err != nil {
		t.Fatal(err)
	}
}

// One changed byte inside a parked environment's record (its saved state,
// still valid base64 and JSON): bbolt's own check passes, so before issue 19
// berth wrote the file and replaced state.db.bak with the damaged copy
// before Load refused it. Now the record's checksum fails at Open, before
// any write; the check names the bucket and key; restore brings the
// environment back from the untouched backup.
func TestDamagedRecordIsFoundBeforeAnythingWrites(t *testing.T) {
	path := parkedState(t)
	changeByte(t, path, `"c2F2ZWQ="`[1:]) // base64 of "saved"
	before, _ := os.ReadFile(path)
	bak, _ := os.ReadFile(path + boltfile.BackupSuffix)

	_, err := Open(path)
	if err == nil {
		t.Fatal("berth opened a state file with a damaged parked environment")
	}
	for _, want := range []string{"environments/e1", "checksum", "berth state restore"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the refused file was written to")
	}
	if after, _ := os.ReadFile(path + boltfile.BackupSuffix); !bytes.Equal(bak, after) {
		t.Error("state.db.bak was replaced")
	}

	recs := boltfile.Records(boltfile.Check(path, CheckRecord))
	if len(recs) != 1 || recs[0].Bucket != "environments" || recs[0].Key != "e1" {
		t.Fatalf("check names %v, want environments/e1", recs)
	}
	if _, err := boltfile.Restore(path, CheckRecord); err != nil {
		t.Fatalf("restore: %v", err)
	}
	b, err := Open(path)
	if err != nil {
		t.Fatalf("open after restore: %v", err)
	}
	defer b.Close()
	st, _, err := b.Load()
	if err != nil || len(st.Envs) != 1 || string(st.Envs[0].State) != "saved" {
		t.Fatalf("after restore: err=%v envs=%+v; want the parked environment back", err, st.Envs)
	}
}

// A record damaged while berth runs must not reach the last good copy: the
// copy is checked before it replaces the previous one.
func TestBackupNeverReplacesTheCopyWithADamagedOne(t *testing.T) {
	path := parkedState(t)
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bak, _ := os.ReadFile(path + boltfile.BackupSuffix)
	changeByte(t, path, `"c2F2ZWQ="`[1:])
	// A commit that leaves the environments' page alone, so the next
	// backup copies the damaged page.
	if err := b.PutHostKey("g", "i1", "ssh-ed25519 AAAA"); err != nil {
		t.Fatal(err)
	}
	err = b.Backup()
	var ce *boltfile.CorruptError
	if !errors.As(err, &ce) || len(ce.Records) != 1 {
		t.Fatalf("backup of a damaged file: %v, want it refused naming the record", err)
	}
	if after, _ := os.ReadFile(path + boltfile.BackupSuffix); !bytes.Equal(bak, after) {
		t.Error("state.db.bak was replaced with a damaged copy")
	}
}

// Issue 19: a state file gone while its last good copy is there, or a
// symbolic link to nothing in its place, started empty without a word.
// berth now refuses, naming the copy; restore puts it back.
func TestMissingStateFileNextToItsBackupIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(path string)
		want   string
	}{
		{"deleted", func(p string) { os.Remove(p) }, "state.db.bak"},
		{"dangling symlink", func(p string) {
			os.Remove(p)
			os.Symlink(p+".gone", p)
		}, "symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := parkedState(t)
			tc.remove(path)
			_, err := Open(path)
			var me *boltfile.MissingError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open: %v, want a refusal naming %q", err, tc.want)
			}
			if _, err := os.Stat(path); err == nil {
				t.Fatal("a new state file was created")
			}
			if _, err := boltfile.Restore(path, CheckRecord); err != nil {
				t.Fatalf("restore: %v", err)
			}
			b, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if st, _, _ := b.Load(); len(st.Envs) != 1 {
				t.Fatalf("after restore: %+v, want the parked environment", st.Envs)
			}
		})
	}
}
