package azurefake

import (
	"cmp"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/ssh"
)

// The state file (Options.StateFile) keeps the subscription across a
// restart of the fake, so a chaos test can restart the cloud under berth:
// the endpoint's address and the instances' SSH port (clients keep their
// URLs), the scale set, every instance with its host key and its
// transition, the operations in flight (pollers keep polling), the access
// tokens issued (clients keep their tokens) and the injected failures.
// Throttling and call counts are the old process's and are not kept.

// savedState is the state file's content.
type savedState struct {
	Addr              string
	SSHPort           int
	SAS               string
	Capacity, Seq     int
	Order             []string
	Instances         map[string]savedInstance
	Ops               map[string]savedOp
	Tokens            map[string]time.Time
	AllocationFailure string
	CoreQuota         int
}

type savedInstance struct {
	Instance
	VisibleAt, Until time.Time
	Seed             []byte // ed25519 seed of the host key
}

type savedOp struct {
	Started, Done time.Time
	Code, Message string
}

// loadState reads the state file into c; a missing file is a fresh start.
func (c *Cloud) loadState() (savedState, error) {
	var st savedState
	if c.opts.StateFile == "" {
		return st, nil
	}
	c.state.Path = c.opts.StateFile
	found, err := c.state.Load(&st)
	if err != nil || !found {
		return st, err
	}
	c.capacity, c.seq, c.order, c.sas = st.Capacity, st.Seq, st.Order, st.SAS
	// Options given at the restart win over the injected failures kept.
	c.opts.AllocationFailure = cmp.Or(c.opts.AllocationFailure, st.AllocationFailure)
	c.opts.CoreQuota = cmp.Or(c.opts.CoreQuota, st.CoreQuota)
	for id, si := range st.Instances {
		in := si.Instance
		in.visibleAt, in.until, in.seed = si.VisibleAt, si.Until, si.Seed
		in.home = filepath.Join(c.opts.Dir, in.Name)
		if in.signer, err = ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(si.Seed)); err != nil {
			return st, fmt.Errorf("azurefake: state file %s: host key of %s: %w", c.opts.StateFile, in.Name, err)
		}
		c.instances[id] = &in
	}
	for id, so := range st.Ops {
		op := &operation{name: id, started: so.Started, done: so.Done}
		if so.Code != "" {
			op.err = &apiError{status: 200, code: so.Code, message: so.Message}
		}
		c.ops[id] = op
	}
	for tok, exp := range st.Tokens {
		c.tokens[tok] = exp
	}
	return st, nil
}

// changedLocked writes the state file when the state changed
// (fakestate: atomically, so a crash leaves the old state or the new).
func (c *Cloud) changedLocked() {
	if c.opts.StateFile == "" || c.srv == nil {
		return
	}
	st := savedState{Addr: c.srv.Listener.Addr().String(), SSHPort: c.port, SAS: c.sas, Capacity: c.capacity, Seq: c.seq,
		Order: c.order, Instances: map[string]savedInstance{}, Ops: map[string]savedOp{}, Tokens: c.tokens,
		AllocationFailure: c.opts.AllocationFailure, CoreQuota: c.opts.CoreQuota}
	for id, in := range c.instances {
		cp := *in
		cp.sshd, cp.signer = nil, nil
		st.Instances[id] = savedInstance{Instance: cp, VisibleAt: in.visibleAt, Until: in.until, Seed: in.seed}
	}
	for id, op := range c.ops {
		so := savedOp{Started: op.started, Done: op.done}
		if op.err != nil {
			so.Code, so.Message = op.err.code, op.err.message
		}
		st.Ops[id] = so
	}
	if err := c.state.Save(st); err != nil {
		fmt.Fprintf(os.Stderr, "azurefake: state file: %v\n", err)
	}
}
