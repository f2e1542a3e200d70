// Package secretfile refuses secret files that users other than their
// owner may read or write: berth's API token, and the SSH private keys
// and cloud credential files the provider plugins are given. OpenSSH
// refuses such a private key too ("UNPROTECTED PRIVATE KEY FILE"); a
// key others could read may already be copied, so the message says to
// replace it as well as to fix the mode.
package secretfile

import (
	"fmt"
	"io/fs"
	"os"
)

// Check stats path and refuses it as CheckInfo does. what names the file
// in the message ("gcp: connector.key_path"), gives says what a reader
// could do with it ("log in to every instance").
func Check(path, what, gives string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return CheckInfo(path, fi, what, gives)
}

// CheckInfo refuses the file path whose information is fi when its mode
// lets users other than its owner read or write it, naming the file and
// the chmod to run.
func CheckInfo(path string, fi fs.FileInfo, what, gives string) error {
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s %s has mode %04o, so other users may read it and %s: run `chmod 600 %s` (in a Kubernetes Secret volume, set defaultMode: 0400), and replace it if others may have read it", what, path, perm, gives, path)
	}
	return nil
}

// Exists reports whether path names a file: a credential file named by
// an environment variable is checked only when there is one, since the
// SDK that reads it reports a missing one itself.
func Exists(path string) bool {
	_, err := os.Stat(path)
	return path != "" && err == nil
}
