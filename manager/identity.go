package manager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/store"
)

// FleetIDFile is the file in the state directory that remembers the
// identity of the fleet this manager serves under [ha] (ha.IdentityError):
// written when the manager first opens the state, read at every start, so
// that an etcd restarted empty is refused rather than taken for a new
// fleet. `berth state new-fleet` rewrites it.
const FleetIDFile = "fleet-id"

// StateIDFile is the same for a single manager's state.db: a state.db
// replaced or gone is refused (checkBoltFleet); `berth state new-fleet`
// removes it. Apart from FleetIDFile, so that moving a manager to [ha]
// does not take state.db's identity for the etcd fleet's.
const StateIDFile = "state-id"

// knownFleet returns the identity recorded in dir, "" when none is.
func knownFleet(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the fleet's identity: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// RecordFleet writes id in dir's file name (FleetIDFile, StateIDFile) as
// the fleet dir's manager serves, through a rename so that a crash leaves
// the old or the new one.
func RecordFleet(dir, name, id string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the fleet's identity: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("record the fleet's identity: %w", err)
	}
	return nil
}

// identityProblem is why this manager refuses to lead, for /healthz; ""
// while the identity held at the last term.
func (h *haState) identityProblem() string {
	if p := h.lostFleet.Load(); p != nil {
		return *p
	}
	return ""
}

// noteIdentity records the outcome of a term's identity check: the fleet
// is not in etcd (ha.IdentityError), or etcd holds its past
// (queue.PastError, ha.RolledBackError).
func (h *haState) noteIdentity(err error) {
	var ie *ha.IdentityError
	var pe *queue.PastError
	var rb *ha.RolledBackError
	if errors.As(err, &ie) || errors.As(err, &pe) || errors.As(err, &rb) {
		msg := err.Error()
		h.lostFleet.Store(&msg)
		return
	}
	if err == nil {
		h.lostFleet.Store(nil)
	}
}

// checkBoltFleet refuses a state.db that is not the recorded fleet's: one
// replaced by another fleet's, or gone (moved aside, a lost disk) while
// the recorded identity says berth had one. Started anyway, berth would
// adopt busy instances as idle and hand them new jobs. Checked before the
// file is opened, which would write to it and replace its .bak.
func checkBoltFleet(path, known string) error {
	if known == "" {
		return nil
	}
	if _, err := os.Stat(path + ".bak"); err == nil {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil // the store refuses this itself, naming the copy and berth state restore
		}
	}
	found, err := store.PeekID(path)
	if err != nil || found == known {
		return nil // a damaged file is the store's to refuse, with its own advice
	}
	what := fmt.Sprintf("%s is gone, but this state directory served fleet %s", path, known)
	if found != "" {
		what = fmt.Sprintf("%s holds fleet %s, but this state directory served fleet %s", path, found, known)
	}
	return fmt.Errorf("%s: berth refuses to start rather than forget the instances it created and hand busy ones new jobs; "+
		"put the fleet's state.db back (berth state restore puts back state.db.bak), or start a new fleet on purpose: "+
		"berth state new-fleet --state-dir %s", what, filepath.Dir(path))
}
