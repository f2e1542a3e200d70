package awsfake

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/internal/fakestate"
)

// A region's state survives a restart of the fake when Options.State
// names a file, so that chaos tests can restart the cloud as well as
// berth: AWS does not forget a group or its instances when an API
// endpoint restarts. The file is written atomically after every call
// that changed something, and read by New. What tests inject (Throttle,
// Deny), the call counts and the 60-second Instance Connect keys are not
// kept.

type savedState struct {
	// Addr is the API's listen address: a restarted fake serves the
	// endpoint berth was given.
	Addr          string          `json:"addr"`
	SSHPort       int             `json:"ssh_port"`
	AuthorizedKey string          `json:"authorized_key"`
	Min           int             `json:"min"`
	Max           int             `json:"max"`
	Desired       int             `json:"desired"`
	Protected     bool            `json:"new_instances_protected"`
	Seq           int             `json:"seq"`
	Order         []string        `json:"order"`
	Instances     []savedInstance `json:"instances"`
}

type savedInstance struct {
	Instance
	HostKeySeed []byte    `json:"host_key_seed"`
	VisibleAt   time.Time `json:"visible_at"`
	Until       time.Time `json:"until"`
	AfterBoot   string    `json:"after_boot"`
	LcNext      string    `json:"lc_next"`
	LcUntil     time.Time `json:"lc_until"`
	Home        string    `json:"home"`
}

func (c *Cloud) snapshotLocked() savedState {
	s := savedState{Addr: c.srv.Listener.Addr().String(), SSHPort: c.port, AuthorizedKey: c.opts.AuthorizedKey,
		Min: c.group.min, Max: c.group.max, Desired: c.group.desired, Protected: c.group.newInstancesProtected,
		Seq: c.seq, Order: c.order}
	for _, id := range c.order {
		in := c.instances[id]
		cp := *in
		cp.sshd, cp.signer = nil, nil
		s.Instances = append(s.Instances, savedInstance{Instance: cp, HostKeySeed: in.seed, VisibleAt: in.visibleAt,
			Until: in.until, AfterBoot: in.afterBoot, LcNext: in.lcNext, LcUntil: in.lcUntil, Home: in.home})
	}
	return s
}

// saveLocked writes the state file when the state changed. A failure is
// printed: the fake goes on serving, as the region it stands for would.
func (c *Cloud) saveLocked() {
	if c.state == nil {
		return
	}
	if err := c.state.Save(c.snapshotLocked()); err != nil {
		fmt.Fprintf(os.Stderr, "awsfake: saving the state: %v\n", err)
	}
}

// loadState reads the state file into c, if there is one; it returns
// the saved listen address ("" for a new region).
func (c *Cloud) loadState() (string, error) {
	c.state = &fakestate.File{Path: c.opts.State}
	var s savedState
	if found, err := c.state.Load(&s); err != nil || !found {
		return "", err
	}
	c.port, c.opts.AuthorizedKey = s.SSHPort, s.AuthorizedKey
	c.group.min, c.group.max, c.group.desired, c.group.newInstancesProtected = s.Min, s.Max, s.Desired, s.Protected
	c.seq, c.order = s.Seq, s.Order
	for _, si := range s.Instances {
		in := si.Instance
		in.seed, in.visibleAt, in.until, in.afterBoot, in.lcNext, in.lcUntil, in.home = si.HostKeySeed, si.VisibleAt, si.Until, si.AfterBoot, si.LcNext, si.LcUntil, si.Home
		if len(in.seed) != ed25519.SeedSize {
			return "", fmt.Errorf("awsfake: state file %s: instance %s has no host key", c.opts.State, in.ID)
		}
		var err error
		if in.signer, err = ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(in.seed)); err != nil {
			return "", err
		}
		c.instances[in.ID] = &in
	}
	return s.Addr, nil
}

// startSavedSSHLocked starts the SSH servers of the loaded instances that
// run: they kept running while the API was away.
func (c *Cloud) startSavedSSHLocked() {
	for _, in := range c.instances {
		if in.State == EC2Running && in.Lifecycle != LifecycleTerminating && in.Lifecycle != "" {
			c.startSSHLocked(in)
		}
	}
}
