//go:build !linux

package localexec

import "errors"

// commandFDs fails: local sandboxes, and so this transport, exist only on
// Linux; the package builds elsewhere for the CLI's sake.
func commandFDs() (pair, pipe [2]int, err error) {
	return pair, pipe, errors.New("local exec needs Linux")
}
