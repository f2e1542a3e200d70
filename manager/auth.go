package manager

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/berth-ci/berth/api"
)

// tokenHash is a token's SHA-256. Tokens are compared by hash, in constant
// time, so neither a token's length nor its first wrong byte shows in how
// long a refusal takes.
type tokenHash [sha256.Size]byte

// credential is one accepted token.
type credential struct {
	hash      tokenHash
	principal api.Principal
}

// racyWindow is more than any file system's timestamp granularity (ext4
// and tmpfs use the kernel's coarse clock, a few milliseconds).
const racyWindow = time.Second

// authenticator maps bearer tokens to principals (see api.Principal for the
// model). The admin token is read (or created) once at start; the
// submitter tokens in api-tokens/ are read again whenever the directory
// changes, so adding or removing a submitter needs no restart.
type authenticator struct {
	adminFile string
	dir       string
	log       *slog.Logger
	admin     credential

	mu        sync.Mutex
	dirMtime  time.Time
	scannedAt time.Time
	dirFound  bool
	subs      []credential
}

// newAuthenticator creates <stateDir>/api-token if it is absent and loads
// the submitter tokens.
func newAuthenticator(stateDir string, log *slog.Logger) (*authenticator, error) {
	a := &authenticator{adminFile: api.TokenPath(stateDir), dir: filepath.Join(stateDir, api.TokensDirName), log: log}
	tok, err := api.EnsureTokenFile(a.adminFile)
	if err != nil {
		return nil, err
	}
	a.admin = credential{hash: sha256.Sum256([]byte(tok)), principal: api.Principal{Name: api.AdminName, Admin: true}}
	a.mu.Lock()
	a.reloadLocked()
	a.mu.Unlock()
	return a, nil
}

// authenticate returns the principal whose token tok is. Every credential
// is compared, also after a match, so the time taken does not tell which
// one matched.
func (a *authenticator) authenticate(tok string) (api.Principal, bool) {
	if tok == "" {
		return api.Principal{}, false
	}
	h := sha256.Sum256([]byte(tok))
	a.mu.Lock()
	a.reloadLocked()
	subs := a.subs
	a.mu.Unlock()
	var found api.Principal
	ok := 0
	if subtle.ConstantTimeCompare(h[:], a.admin.hash[:]) == 1 {
		found, ok = a.admin.principal, 1
	}
	for _, c := range subs {
		if subtle.ConstantTimeCompare(h[:], c.hash[:]) == 1 && ok == 0 {
			found, ok = c.principal, 1
		}
	}
	return found, ok == 1
}

// reloadLocked rereads api-tokens/ when its modification time changed
// (adding, removing or renaming a file changes it; to rotate a token,
// write the new file beside it and rename it over the old one).
func (a *authenticator) reloadLocked() {
	fi, err := os.Stat(a.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if a.dirFound {
			a.log.Info("api-tokens directory removed: only the admin token is accepted now", "dir", a.dir)
		}
		a.dirFound, a.subs = false, nil
		return
	case err != nil:
		a.log.Warn("cannot read submitter tokens; keeping the ones loaded before", "dir", a.dir, "err", err)
		return
	}
	// A change within the file system's timestamp granularity of the last
	// scan may leave the time as it was ("racy" as git calls it), so the
	// directory is read again until the scan is clearly later than the
	// change.
	if a.dirFound && fi.ModTime().Equal(a.dirMtime) && a.scannedAt.Sub(a.dirMtime) > racyWindow {
		return
	}
	a.dirFound, a.dirMtime, a.scannedAt = true, fi.ModTime(), time.Now()
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		a.log.Error("api-tokens directory is writable by other users, so anyone could add a token: accepting none of its tokens until `chmod go-w` fixes it", "dir", a.dir, "mode", fmt.Sprintf("%04o", perm))
		a.subs = nil
		return
	}
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		a.log.Warn("cannot read submitter tokens; keeping the ones loaded before", "dir", a.dir, "err", err)
		return
	}
	seen := map[tokenHash]string{a.admin.hash: api.AdminName}
	var subs []credential
	for _, e := range entries {
		name := e.Name()
		if name[0] == '.' { // editors' and our own temporary files
			continue
		}
		if !api.ValidSubmitterName(name) {
			a.log.Warn("ignoring token file: its name must be letters, digits, '.', '_' or '-' and not \"admin\"", "file", filepath.Join(a.dir, name))
			continue
		}
		tok, err := api.ReadTokenFile(filepath.Join(a.dir, name))
		if err != nil {
			a.log.Warn("ignoring token file", "err", err)
			continue
		}
		h := sha256.Sum256([]byte(tok))
		if other, dup := seen[h]; dup {
			a.log.Warn("ignoring token file: it holds the same token as another principal; give each submitter its own token", "file", filepath.Join(a.dir, name), "other", other)
			continue
		}
		seen[h] = name
		subs = append(subs, credential{hash: h, principal: api.Principal{Name: name}})
	}
	if !sameNames(subs, a.subs) {
		a.log.Info("loaded submitter tokens", "dir", a.dir, "submitters", len(subs))
	}
	a.subs = subs
}

func sameNames(a, b []credential) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].principal.Name != b[i].principal.Name || a[i].hash != b[i].hash {
			return false
		}
	}
	return true
}
