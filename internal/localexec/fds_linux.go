package localexec

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// commandFDs makes a command's socket pair (berth's end nonblocking, for
// the netpoller) and its stdin pipe, close-on-exec from the start so that
// no process berth forks meanwhile inherits them.
func commandFDs() (pair, pipe [2]int, err error) {
	p, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return pair, pipe, fmt.Errorf("command socket pair: %w", err)
	}
	pair = [2]int{p[0], p[1]}
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		unix.Close(pair[0])
		unix.Close(pair[1])
		return pair, pipe, fmt.Errorf("stdin pipe: %w", err)
	}
	return pair, pipe, nil
}
