package manager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-ci/berth/ha"
)

// FleetIDFile is the file in the state directory that remembers the
// identity of the fleet this manager serves under [ha] (ha.IdentityError):
// written when the manager first opens the state, read at every start, so
// that an etcd restarted empty is refused rather than taken for a new
// fleet. `berth state new-fleet` rewrites it.
const FleetIDFile = "fleet-id"

// knownFleet returns the identity recorded in dir, "" when none is.
func knownFleet(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, FleetIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the fleet's identity: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// RecordFleet writes id as the fleet dir's manager serves, through a
// rename so that a crash leaves the old or the new one.
func RecordFleet(dir, id string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, FleetIDFile+".tmp")
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the fleet's identity: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, FleetIDFile)); err != nil {
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

// noteIdentity records the outcome of a term's identity check.
func (h *haState) noteIdentity(err error) {
	var ie *ha.IdentityError
	if errors.As(err, &ie) {
		msg := ie.Error()
		h.lostFleet.Store(&msg)
		return
	}
	if err == nil {
		h.lostFleet.Store(nil)
	}
}
