package manager

import "sync/atomic"

// loopCount is how many job loops a source should run (want) and runs
// (live). A reload changes want and says so on resized; sourceLoops
// starts the missing loops, and a loop beyond want leaves at its next
// turn.
type loopCount struct {
	want, live atomic.Int64
	resized    chan struct{}
}

func newLoopCount(n int) *loopCount {
	c := &loopCount{resized: make(chan struct{}, 1)}
	c.want.Store(int64(max(1, n)))
	return c
}

// resize sets how many loops are wanted.
func (c *loopCount) resize(n int) {
	c.want.Store(int64(max(1, n)))
	select {
	case c.resized <- struct{}{}:
	default: // one already waits to be seen
	}
}

// leave reports whether the calling loop is one too many, and then counts
// it out: of loops that ask at once, only the surplus leaves.
func (c *loopCount) leave() bool {
	for {
		n := c.live.Load()
		if n <= c.want.Load() {
			return false
		}
		if c.live.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
