package awsfake

import "math"

// ThrottleOn throttles every call of action (any action when "") from
// now until ThrottleOn(action, false), as AWS does while an account is
// over an action's request rate: EC2 answers RequestLimitExceeded with
// HTTP 503 ("Request throttling for the Amazon EC2 API", EC2 API
// reference; per account and per action), Auto Scaling Throttling with
// HTTP 400 (Auto Scaling API reference, "Common errors"). Unlike
// Throttle, the number of refusals does not depend on who calls: a test
// can hold the throttling until it has seen what it waits for.
func (c *Cloud) ThrottleOn(action string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.throttle[action] = math.MaxInt / 2
	} else {
		c.throttle[action] = 0
	}
}
