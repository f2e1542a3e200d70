package gitlab

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// DirLedger is the Ledger of one manager: a file per job in a directory of
// its state dir, written before berth acts on the job (a rename, so a
// crash never leaves half a record). It is safe for concurrent use.
type DirLedger struct {
	dir string
	log *slog.Logger

	mu sync.Mutex
	// mine holds the jobs this process added and has not removed: not
	// abandoned, whatever the directory says.
	mine map[int64]bool
}

var _ Ledger = (*DirLedger)(nil)

// NewDirLedger keeps the ledger in dir, made at the first Add. log
// reports records it drops as unreadable; nil is slog.Default().
func NewDirLedger(dir string, log *slog.Logger) *DirLedger {
	if log == nil {
		log = slog.Default()
	}
	return &DirLedger{dir: dir, log: log, mine: map[int64]bool{}}
}

func (l *DirLedger) path(id int64) string {
	return filepath.Join(l.dir, strconv.FormatInt(id, 10)+".json")
}

// Add writes the job's record.
func (l *DirLedger) Add(_ context.Context, e LedgerEntry) error {
	l.mu.Lock()
	l.mine[e.ID] = true
	l.mu.Unlock()
	data, _ := json.Marshal(e)
	path := l.path(e.ID)
	tmp := path + ".tmp"
	err := os.MkdirAll(l.dir, 0o700)
	if err == nil {
		err = os.WriteFile(tmp, data, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	return err
}

// Remove deletes the job's record.
func (l *DirLedger) Remove(_ context.Context, id int64) error {
	l.mu.Lock()
	delete(l.mine, id)
	l.mu.Unlock()
	if err := os.Remove(l.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Abandoned lists the records of earlier processes. A record cut short
// by a crash (a .tmp file) or unreadable is removed: it cannot be failed.
func (l *DirLedger) Abandoned(context.Context) ([]LedgerEntry, error) {
	ents, err := os.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var left []LedgerEntry
	for _, ent := range ents {
		name := ent.Name()
		if l.isMine(name) {
			continue
		}
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(l.dir, name)) // a write cut short
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		if e, ok := l.read(name); ok {
			left = append(left, e)
		}
	}
	return left, nil
}

// isMine says whether a file of the directory is a job this process added.
func (l *DirLedger) isMine(name string) bool {
	id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSuffix(name, ".tmp"), ".json"), 10, 64)
	if err != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mine[id]
}

// read decodes one record, removing it when it cannot be.
func (l *DirLedger) read(name string) (LedgerEntry, bool) {
	data, err := os.ReadFile(filepath.Join(l.dir, name))
	var e LedgerEntry
	if err != nil || json.Unmarshal(data, &e) != nil || e.ID == 0 {
		l.log.Warn("unreadable record of a gitlab job handed out; removed", "file", name)
		os.Remove(filepath.Join(l.dir, name))
		return LedgerEntry{}, false
	}
	return e, true
}
