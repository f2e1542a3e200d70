package gcpfake

import (
	"net/http"
	"sync"
)

// holds are the methods whose calls never reach Google: each waits on its
// channel. Kept apart from Cloud.mu, which a held call must not hold.
type holds struct {
	mu      sync.Mutex
	gates   map[string]chan struct{}
	waiting map[string]int
}

// Hold makes the calls of method (e.g. "instanceGroupManagers.resize")
// wait unanswered from now on, as a call lost in the network before it
// reached Google would: a held call whose caller goes away (the plugin
// killed, its context ended) is dropped with no effect on the project.
// Release lets the held calls and the next ones through. It stands for a
// request that never arrived, which Compute Engine cannot report; it
// models no behaviour of the API itself.
func (c *Cloud) Hold(method string) {
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	if c.holds.gates == nil {
		c.holds.gates, c.holds.waiting = map[string]chan struct{}{}, map[string]int{}
	}
	if c.holds.gates[method] == nil {
		c.holds.gates[method] = make(chan struct{})
	}
}

// Release ends Hold(method): the calls still waiting go through.
func (c *Cloud) Release(method string) {
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	if g := c.holds.gates[method]; g != nil {
		close(g)
		delete(c.holds.gates, method)
	}
}

// Held returns how many calls of method wait in a Hold now.
func (c *Cloud) Held(method string) int {
	c.holds.mu.Lock()
	defer c.holds.mu.Unlock()
	return c.holds.waiting[method]
}

// wait holds a call of method while a Hold lasts; it returns false when
// the caller went away first, and the call is to be dropped.
func (c *Cloud) wait(r *http.Request, method string) bool {
	c.holds.mu.Lock()
	g := c.holds.gates[method]
	if g == nil {
		c.holds.mu.Unlock()
		return true
	}
	c.holds.waiting[method]++
	c.holds.mu.Unlock()
	defer func() {
		c.holds.mu.Lock()
		c.holds.waiting[method]--
		c.holds.mu.Unlock()
	}()
	select {
	case <-g:
		return true
	case <-r.Context().Done():
		return false
	}
}
