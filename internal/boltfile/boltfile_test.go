package boltfile

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// goodFile writes a bbolt file with nested buckets, many keys and a value
// spanning overflow pages, then frees some pages so the freelist is not empty.
func goodFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		err = db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("instances"))
			if err != nil {
				return err
			}
			sub, err := b.CreateBucketIfNotExists([]byte("nested"))
			if err != nil {
				return err
			}
			for i := range 300 {
				k := []byte(fmt.Sprintf("key-%04d", i))
				if err := b.Put(k, bytes.Repeat([]byte{byte(i + round)}, 40)); err != nil {
					return err
				}
				if err := sub.Put(k, []byte("v")); err != nil {
					return err
				}
			}
			return b.Put([]byte("big"), bytes.Repeat([]byte("x"), 20000))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Check(path); err != nil {
		t.Fatalf("a good file fails the check: %v", err)
	}
	return path
}

func pageSize(t *testing.T, path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, why := readMeta(f, 0)
	if why != "" {
		t.Fatal(why)
	}
	return int64(m.pageSize)
}

func overwrite(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(r *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// wantCorrupt checks that Check refuses path with a problem mentioning want,
// and that the file was not written.
func wantCorrupt(t *testing.T, path, want string) {
	t.Helper()
	before, _ := os.ReadFile(path)
	err := Check(path)
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("Check: %v, want a *CorruptError", err)
	}
	if ce.Path != path || !strings.Contains(ce.Problem, want) {
		t.Fatalf("Check: %q, want the file's name and %q", err, want)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("Check wrote to the file it refused")
	}
}

func TestCheckRefusesDamagedFiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, ps int64)
		want   string
	}{
		{"empty", func(t *testing.T, p string, _ int64) { os.Truncate(p, 0) }, "is empty (0 bytes)"},
		{"truncated to 10000 bytes", func(t *testing.T, p string, _ int64) { os.Truncate(p, 10000) }, "is truncated"},
		{"truncated to half", func(t *testing.T, p string, _ int64) {
			fi, _ := os.Stat(p)
			os.Truncate(p, fi.Size()/2)
		}, "is truncated"},
		{"tiny", func(t *testing.T, p string, _ int64) { os.Truncate(p, 100) }, "too small"},
		{"not a bbolt file", func(t *testing.T, p string, _ int64) {
			os.WriteFile(p, bytes.Repeat([]byte("hello world\n"), 2000), 0o600)
		}, "both meta pages are damaged"},
		{"both meta pages random", func(t *testing.T, p string, ps int64) { overwrite(t, p, 0, randomBytes(r, 2*ps)) }, "both meta pages are damaged"},
		{"freelist page random", func(t *testing.T, p string, ps int64) {
			f, _ := os.Open(p)
			m, _ := chooseMeta(f, 1<<30)
			f.Close()
			overwrite(t, p, int64(m.freelist)*ps, randomBytes(r, ps))
		}, "freelist"},
		{"root page random", func(t *testing.T, p string, ps int64) {
			f, _ := os.Open(p)
			m, _ := chooseMeta(f, 1<<30)
			f.Close()
			overwrite(t, p, int64(m.root)*ps, randomBytes(r, ps))
		}, ""},
		{"all data pages zeroed", func(t *testing.T, p string, ps int64) {
			fi, _ := os.Stat(p)
			overwrite(t, p, 2*ps, make([]byte, fi.Size()-2*ps))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := goodFile(t)
			tc.damage(t, path, pageSize(t, path))
			wantCorrupt(t, path, tc.want)
		})
	}
}

// Every page of the file, in turn, is overwritten with random bytes. Check
// must never panic or fault, and when it accepts the file, bbolt must be able
// to open it read-write and read all of it: that is what Check promises.
func TestCheckSurvivesRandomPages(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	good := goodFile(t)
	ps := pageSize(t, good)
	data, _ := os.ReadFile(good)
	pages := int64(len(data)) / ps
	var refused, accepted int
	for pg := int64(0); pg < pages; pg++ {
		for try := range 3 {
			path := filepath.Join(t.TempDir(), "state.db")
			os.WriteFile(path, data, 0o600)
			overwrite(t, path, pg*ps, randomBytes(r, ps))
			err := Check(path)
			var ce *CorruptError
			switch {
			case errors.As(err, &ce):
				refused++
				continue
			case err != nil:
				t.Fatalf("page %d try %d: %v", pg, try, err)
			}
			accepted++
			// Accepted: the file must be fully usable read-write.
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("page %d try %d: Check accepted a file bbolt panics on: %v", pg, try, p)
					}
				}()
				db, err := bolt.Open(path, 0o600, nil)
				if err != nil {
					t.Fatalf("page %d: Check accepted a file bbolt cannot open: %v", pg, err)
				}
				defer db.Close()
				if err := db.Update(func(tx *bolt.Tx) error {
					_, err := tx.CreateBucketIfNotExists([]byte("after"))
					return err
				}); err != nil {
					t.Fatalf("page %d: write after an accepted check: %v", pg, err)
				}
			}()
		}
	}
	t.Logf("%d pages × 3 random overwrites: %d refused, %d accepted (unused or free pages)", pages, refused, accepted)
	if refused == 0 {
		t.Fatal("no random page was refused")
	}
}

func TestCheckAcceptsAMissingFile(t *testing.T) {
	if err := Check(filepath.Join(t.TempDir(), "none.db")); err != nil {
		t.Fatal(err)
	}
}

func TestBackupIsAGoodCopy(t *testing.T) {
	path := goodFile(t)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Backup(db, path); err != nil {
		t.Fatal(err)
	}
	if err := Check(path + BackupSuffix); err != nil {
		t.Fatalf("backup fails the check: %v", err)
	}
	if Age(path) == "" {
		t.Fatal("Age finds no backup")
	}
}

func TestBackerCopiesOnlyAfterACommit(t *testing.T) {
	path := goodFile(t)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := NewBacker(db, path)
	if err := b.Backup(); err != nil {
		t.Fatal(err)
	}
	first, _ := os.Stat(path + BackupSuffix)
	if err := b.Backup(); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Stat(path + BackupSuffix); !os.SameFile(first, again) {
		t.Fatal("the copy was rewritten although nothing was committed")
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := b.Backup(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(path + BackupSuffix); os.SameFile(first, after) {
		t.Fatal("the copy was not rewritten after a commit")
	}
}
