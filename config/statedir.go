package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultStateDir returns where state lives when state_dir is not set. In
// order of preference:
//
//  1. $XDG_STATE_HOME/berth, when XDG_STATE_HOME is an absolute path (the
//     XDG base-directory rule; ~/.local/state is only its default);
//  2. $HOME/.local/state/berth, when $HOME is set and that directory exists
//     and is writable or could be created (its nearest existing ancestor is
//     writable);
//  3. $TMPDIR/berth-$UID (usually /tmp/berth-1000), for accounts without a
//     usable home such as "nobody" (HOME=/nonexistent) or minimal containers.
//
// The third choice lives in a shared directory, so whoever creates it must
// create it mode 0700 and refuse it when it exists but is owned by another
// user. State there may not survive a reboot; set state_dir for production.
func DefaultStateDir() string {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "berth")
	}
	if home := os.Getenv("HOME"); home != "" && filepath.IsAbs(home) {
		dir := filepath.Join(home, ".local", "state", "berth")
		if creatable(dir) {
			return dir
		}
	}
	return filepath.Join(os.TempDir(), "berth-"+strconv.Itoa(os.Getuid()))
}

// creatable reports whether dir exists and is writable, or its nearest
// existing ancestor is writable, without creating anything.
func creatable(dir string) bool {
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			return fi.IsDir() && unix.Access(dir, unix.W_OK) == nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

// expandHome expands a leading "~" or "~/" to $HOME. "~user" is not
// supported: it needs a user database lookup that static builds lack.
func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		if strings.HasPrefix(p, "~") {
			return "", errors.New(`"~user" paths are not supported; write the absolute path`)
		}
		return p, nil
	}
	home := os.Getenv("HOME")
	if home == "" {
		return "", errors.New(`cannot expand "~": $HOME is not set; write an absolute path`)
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}
