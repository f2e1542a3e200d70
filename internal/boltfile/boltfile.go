// Package boltfile checks and backs up berth's bbolt files (state.db,
// queue.db) so that a damaged file is refused before anything writes to it.
//
// bbolt trusts its file: opened read-write, a truncated file dies with SIGBUS
// when a page past the end is touched, a damaged freelist panics ("invalid
// freelist page", "freelist pgid above high water mark"), and a 0-byte file
// is silently initialised as a new, empty database. Check looks first,
// without writing: it reads the meta pages and the freelist with ordinary
// bounded reads, compares the file's size with the high-water mark, then
// opens the file read-only and reads every reachable page with faults turned
// into errors, and finally runs bbolt's own consistency check (Tx.Check).
package boltfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/berth-ci/berth/internal/diskfull"
)

// BackupSuffix names the last good copy of a file: state.db.bak.
const BackupSuffix = ".bak"

// ErrLocked is returned by Check when a running process holds the file.
var ErrLocked = errors.New("the file is locked by a running berth")

// CorruptError says what is wrong with a bbolt file.
type CorruptError struct {
	// Path is the file.
	Path string
	// Problem says what is wrong, in words.
	Problem string
	// Records lists the damaged records when the file's structure is
	// sound but records in it fail their owner's check.
	Records []*RecordError
}

func (e *CorruptError) Error() string { return e.Path + ": " + e.Problem }

func corrupt(path, format string, args ...any) error {
	return &CorruptError{Path: path, Problem: fmt.Sprintf(format, args...)}
}

// On-disk layout of bbolt (go.etcd.io/bbolt/internal/common), read here with
// bounded reads so that a damaged file cannot fault the process.
const (
	pageHeaderSize   = 16
	metaChecksumOff  = 56 // bytes of the meta covered by its checksum
	magic            = 0xED0CDAED
	version          = 2
	freelistPageFlag = 0x10
	metaPageFlag     = 0x04
	noFreelist       = ^uint64(0)
	maxCheckErrors   = 5
)

type meta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// readMeta decodes and validates the meta page at off. It returns why it is
// unusable, or "".
func readMeta(f *os.File, off int64) (meta, string) {
	var buf [pageHeaderSize + 64]byte
	if _, err := f.ReadAt(buf[:], off); err != nil {
		return meta{}, fmt.Sprintf("cannot read %d bytes at offset %d: %v", len(buf), off, err)
	}
	le := binary.LittleEndian
	if flags := le.Uint16(buf[8:]); flags != metaPageFlag {
		return meta{}, fmt.Sprintf("page at offset %d is not a meta page (flags %#x)", off, flags)
	}
	m := buf[pageHeaderSize:]
	if le.Uint32(m[0:]) != magic {
		return meta{}, fmt.Sprintf("no bbolt magic number at offset %d: not a bbolt file, or overwritten", off)
	}
	if v := le.Uint32(m[4:]); v != version {
		return meta{}, fmt.Sprintf("meta page at offset %d has format version %d, want %d", off, v, version)
	}
	h := fnv.New64a()
	h.Write(m[:metaChecksumOff])
	if le.Uint64(m[metaChecksumOff:]) != h.Sum64() {
		return meta{}, fmt.Sprintf("meta page at offset %d fails its checksum", off)
	}
	md := meta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
		pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
	if md.pageSize < 1024 || md.pageSize > 1<<24 || md.pageSize&(md.pageSize-1) != 0 {
		return meta{}, fmt.Sprintf("meta page at offset %d has an impossible page size %d", off, md.pageSize)
	}
	return md, ""
}

// Check verifies the bbolt file at path without writing to it. A missing file
// is fine (a new one will be created); a 0-byte, truncated or damaged one is
// a *CorruptError. A file held by a running berth gives ErrLocked. With recs,
// every value of every top-level bucket is also decoded by recs[0]; damaged
// records make a *CorruptError whose Records name them.
func Check(path string, recs ...RecordCheck) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return corrupt(path, "is not a regular file (%s)", fi.Mode().Type())
	}
	size := fi.Size()
	if size == 0 {
		return corrupt(path, "is empty (0 bytes): it was truncated (a full disk, or `: > file`), so everything it held is gone")
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	m, why := chooseMeta(f, size)
	if why != "" {
		f.Close()
		return corrupt(path, "%s", why)
	}
	ps := uint64(m.pageSize)
	if need := m.pgid * ps; m.pgid < 2 || need/ps != m.pgid || uint64(size) < need {
		f.Close()
		return corrupt(path, "is truncated: %d bytes, but its last transaction uses %d pages of %d bytes (%d bytes)", size, m.pgid, ps, m.pgid*ps)
	}
	if m.root < 2 || m.root >= m.pgid {
		f.Close()
		return corrupt(path, "root page %d is outside the file's %d pages", m.root, m.pgid)
	}
	if why := checkFreelist(f, m); why != "" {
		f.Close()
		return corrupt(path, "%s", why)
	}
	f.Close()
	var p *recordProblems
	if len(recs) > 0 {
		p = &recordProblems{check: recs[0]}
	}
	return checkPages(path, p)
}

// chooseMeta returns the meta bbolt would use: the valid one with the higher
// transaction id.
func chooseMeta(f *os.File, size int64) (meta, string) {
	if size < 2*1024 {
		return meta{}, fmt.Sprintf("is too small to be a bbolt file (%d bytes)", size)
	}
	m0, why0 := readMeta(f, 0)
	var m1 meta
	var why1 string
	if why0 == "" {
		m1, why1 = readMeta(f, int64(m0.pageSize))
	} else {
		// Page 0 is damaged, so its page size is unknown: try them all, as bbolt does.
		why1 = "no second meta page found"
		for ps := int64(1024); ps <= 1<<24 && ps < size; ps <<= 1 {
			if m, w := readMeta(f, ps); w == "" && int64(m.pageSize) == ps {
				m1, why1 = m, ""
				break
			}
		}
	}
	switch {
	case why0 != "" && why1 != "":
		return meta{}, fmt.Sprintf("both meta pages are damaged (%s; %s)", why0, why1)
	case why0 != "":
		return m1, ""
	case why1 != "":
		return m0, ""
	case m1.txid > m0.txid:
		return m1, ""
	}
	return m0, ""
}

// checkFreelist reads the freelist page the way bbolt will at a read-write
// open, where a damaged one panics.
func checkFreelist(f *os.File, m meta) string {
	if m.freelist == noFreelist {
		return ""
	}
	if m.freelist < 2 || m.freelist >= m.pgid {
		return fmt.Sprintf("freelist page %d is outside the file's %d pages", m.freelist, m.pgid)
	}
	ps := int64(m.pageSize)
	var hdr [pageHeaderSize + 8]byte
	if _, err := f.ReadAt(hdr[:], int64(m.freelist)*ps); err != nil {
		return fmt.Sprintf("cannot read freelist page %d: %v", m.freelist, err)
	}
	le := binary.LittleEndian
	if flags := le.Uint16(hdr[8:]); flags != freelistPageFlag {
		return fmt.Sprintf("page %d should hold the freelist but is of another kind (flags %#x)", m.freelist, flags)
	}
	overflow := uint64(le.Uint32(hdr[12:]))
	if m.freelist+overflow >= m.pgid {
		return fmt.Sprintf("freelist pages %d-%d run past the file's %d pages", m.freelist, m.freelist+overflow, m.pgid)
	}
	count, start := uint64(le.Uint16(hdr[10:])), int64(pageHeaderSize)
	if count == 0xFFFF {
		count, start = le.Uint64(hdr[pageHeaderSize:]), pageHeaderSize+8
	}
	span := int64(overflow+1) * ps
	if count > uint64(span/8) || start+int64(count)*8 > span {
		return fmt.Sprintf("freelist page %d claims %d free pages, more than it can hold", m.freelist, count)
	}
	ids := make([]byte, count*8)
	if _, err := f.ReadAt(ids, int64(m.freelist)*ps+start); err != nil && err != io.EOF {
		return fmt.Sprintf("cannot read freelist page %d: %v", m.freelist, err)
	}
	seen := make(map[uint64]bool, count)
	for i := uint64(0); i < count; i++ {
		id := le.Uint64(ids[i*8:])
		if id < 2 || id >= m.pgid {
			return fmt.Sprintf("freelist lists page %d, outside the file's %d pages", id, m.pgid)
		}
		if seen[id] {
			return fmt.Sprintf("freelist lists page %d twice", id)
		}
		seen[id] = true
	}
	return ""
}

// checkPages opens the file read-only (bbolt writes nothing then), reads
// every reachable page and value, and runs Tx.Check. Reads go through bbolt's
// memory map, so a wild page pointer would fault: the walk runs on its own
// goroutine with faults turned into panics, and recovers them.
func checkPages(path string, recs *recordProblems) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("%s: %w", path, ErrLocked)
	}
	if err != nil {
		return corrupt(path, "bbolt cannot open it: %v", err)
	}
	defer db.Close()
	walked := make(chan string, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				walked <- fmt.Sprintf("reading its pages failed: %v", r)
			}
		}()
		walked <- walk(db, recs)
	}()
	if why := <-walked; why != "" {
		return corrupt(path, "%s", why)
	}
	var problems []string
	err = db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			if len(problems) < maxCheckErrors {
				problems = append(problems, e.Error())
			} else if len(problems) == maxCheckErrors {
				problems = append(problems, "…")
			}
		}
		return nil
	})
	if err != nil {
		return corrupt(path, "bbolt cannot read it: %v", err)
	}
	if len(problems) > 0 {
		return corrupt(path, "bbolt's consistency check failed: %s", strings.Join(problems, "; "))
	}
	if recs != nil && len(recs.errs) > 0 {
		return &CorruptError{Path: path, Problem: recs.String(), Records: recs.errs}
	}
	return nil
}

// walk reads every bucket, key and value, so that every reachable page is
// touched once.
func walk(db *bolt.DB, recs *recordProblems) string {
	var why string
	err := db.View(func(tx *bolt.Tx) error {
		var sum byte
		var visit func(name []byte, b *bolt.Bucket, depth int) error
		visit = func(name []byte, b *bolt.Bucket, depth int) error {
			if depth > 64 {
				return errors.New("buckets nest deeper than 64 levels: a page points back at its parent")
			}
			return b.ForEach(func(k, v []byte) error {
				for _, c := range v {
					sum ^= c
				}
				if v == nil {
					if sub := b.Bucket(k); sub != nil {
						return visit(name, sub, depth+1)
					}
				}
				if depth == 1 {
					recs.visit(name, k, v)
				}
				return nil
			})
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return visit(name, b, 1)
		})
	})
	if err != nil {
		why = "reading its pages failed: " + err.Error()
	}
	return why
}

// Backup writes a consistent copy of db to path+BackupSuffix (through a
// temporary file and a rename, so the previous copy survives a failure). The
// temporary file has a fixed name, so a crash in the middle leaves at most
// one behind, reused next time. Only the process holding db calls it.
func Backup(db *bolt.DB, path string) error {
	return db.View(func(tx *bolt.Tx) error { return backupTx(tx, path) })
}

// backupTx writes the copy to a temporary file and checks it, records
// included, before it replaces the last good copy: a copy of a damaged file
// must never destroy the backup that could repair it (issue 19).
func backupTx(tx *bolt.Tx, path string, recs ...RecordCheck) error {
	dst := path + BackupSuffix
	tmp, err := os.OpenFile(dst+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("back up %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tx.WriteTo(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		if cerr := Check(tmp.Name(), recs...); cerr != nil {
			return fmt.Errorf("back up %s: the copy fails the check, so the last good copy %s stays: %w", path, dst, cerr)
		}
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return fmt.Errorf("back up %s to %s: %w", path, dst, err)
	}
	return nil
}

// Backer keeps the last good copy of one open bbolt file. It skips the copy
// when nothing was committed since the last one, so that a periodic backup
// of a large, quiet queue costs nothing.
type Backer struct {
	db   *bolt.DB
	path string
	recs []RecordCheck

	mu     sync.Mutex
	lastTx int // transaction id of the last copy; -1 before the first
}

// NewBacker returns a Backer for db, open at path. Each copy must pass
// Check with recs before it replaces the previous one.
func NewBacker(db *bolt.DB, path string, recs ...RecordCheck) *Backer {
	return &Backer{db: db, path: path, recs: recs, lastTx: -1}
}

// Backup writes path+BackupSuffix unless it already holds the last commit.
func (b *Backer) Backup() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.db.View(func(tx *bolt.Tx) error {
		if tx.ID() == b.lastTx {
			return nil
		}
		if err := backupTx(tx, b.path, b.recs...); err != nil {
			return err
		}
		b.lastTx = tx.ID()
		return nil
	})
}

// Age describes when the backup of path was written, e.g. "saved 12m ago",
// or "" if there is none.
func Age(path string) string {
	fi, err := os.Stat(path + BackupSuffix)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("written %s, %s ago", fi.ModTime().UTC().Format(time.RFC3339), time.Since(fi.ModTime()).Round(time.Second))
}

// Refuse turns a failed Check of one of berth's files into the error berth
// stops with: the file, what is wrong, that nothing was written, and what to
// do. stateDir is the --state-dir holding the file; lose says what starting
// without the file loses.
func Refuse(err error, stateDir, lose string) error {
	var ce *CorruptError
	if !errors.As(err, &ce) {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s is damaged: %s. berth has not written to it and will not start on it, because starting empty would lose %s. To recover: `berth state check --state-dir %s` lists every problem", ce.Path, ce.Problem, lose, stateDir)
	if age := Age(ce.Path); age != "" {
		fmt.Fprintf(&b, "; `berth state restore --state-dir %s` puts back the last good copy %s (%s) and keeps the damaged file aside", stateDir, filepath.Base(ce.Path)+BackupSuffix, age)
	} else {
		fmt.Fprintf(&b, "; there is no backup (%s) to restore", filepath.Base(ce.Path)+BackupSuffix)
	}
	fmt.Fprintf(&b, "; or move %s aside to start without it on purpose", filepath.Base(ce.Path))
	return &RefusedError{CorruptError: ce, msg: b.String()}
}

// RefusedError is a damaged file berth refuses to start on; errors.As finds
// the *CorruptError inside.
type RefusedError struct {
	*CorruptError
	msg string
}

func (e *RefusedError) Error() string { return e.msg }

// Unwrap returns the *CorruptError.
func (e *RefusedError) Unwrap() error { return e.CorruptError }

// Restore replaces the damaged file at path with its last good copy
// (path+BackupSuffix), keeping the damaged file as path.damaged-TIME, whose
// name it returns. It refuses when the file passes the check, when the file
// is in use, and when the backup itself fails the check.
func Restore(path string, recs ...RecordCheck) (aside string, err error) {
	switch err := Check(path, recs...); {
	case err == nil:
		if _, serr := os.Stat(path); serr == nil {
			return "", fmt.Errorf("%s passes the check: nothing to restore (move it aside first to replace it on purpose)", path)
		}
	case errors.Is(err, ErrLocked):
		return "", fmt.Errorf("%s: %w; stop berth first", path, err)
	default:
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return "", err
		}
	}
	bak := path + BackupSuffix
	if _, err := os.Stat(bak); err != nil {
		return "", fmt.Errorf("no last good copy of %s to restore: %w", path, err)
	}
	if err := Check(bak, recs...); err != nil {
		return "", fmt.Errorf("the last good copy is damaged too: %w; move %s aside to start without it", err, path)
	}
	data, err := os.ReadFile(bak)
	if err != nil {
		return "", err
	}
	tmp := path + ".restore.tmp"
	if err := writeSync(tmp, data); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("restore %s: %w", path, err)
	}
	if _, err := os.Stat(path); err == nil {
		aside = fmt.Sprintf("%s.damaged-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(path, aside); err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("move the damaged %s aside: %w", path, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return aside, fmt.Errorf("restore %s: %w", path, err)
	}
	return aside, nil
}

func writeSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Create makes an empty bbolt file at path if there is none, through a
// temporary file and a rename: bbolt would create path itself and write its
// first pages afterwards, so a full disk would leave a 0-byte file behind,
// which the next start must refuse as damaged.
func Create(path string) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := missing(path); err != nil {
		return err
	}
	tmp := path + ".new"
	os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second})
	if err == nil {
		err = db.Close()
	}
	if err == nil {
		var f *os.File
		if f, err = os.Open(tmp); err == nil {
			err = f.Sync()
			f.Close()
		}
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		if full := diskfull.Explain(filepath.Dir(path), err); full != nil {
			return full
		}
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// MissingError is a state file that is gone while its last good copy is
// there, or a symbolic link to nothing: starting empty would silently lose
// what the copy holds.
type MissingError struct {
	// Path is the missing file.
	Path string
	// Why says what was found in its place.
	Why string
}

func (e *MissingError) Error() string { return e.Path + " " + e.Why }

// missing refuses to create path anew when that would hide a loss: a
// dangling symbolic link in its place, or its last good copy beside it.
func missing(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		return &MissingError{Path: path, Why: fmt.Sprintf("is a symbolic link to %s, which does not exist: berth will not start empty in its place; restore the file it points to, or remove the link to start without it on purpose", target)}
	}
	bak := path + BackupSuffix
	if _, err := os.Stat(bak); err == nil {
		return &MissingError{Path: path, Why: fmt.Sprintf("is missing, but its last good copy %s (%s) is there: berth will not start empty and lose what the copy holds; `berth state restore` (with the --config or --state-dir berth runs with) puts the copy back, or move %s aside to start without it on purpose", filepath.Base(bak), Age(path), filepath.Base(bak))}
	}
	return nil
}
