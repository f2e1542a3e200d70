package gcpfake

import (
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/internal/fakestate"
)

// A project's state survives a restart of the fake when Options.State
// names a file, so that chaos tests can restart the cloud as well as
// berth: a real project does not forget its group, its instances, its
// operations or the access tokens it issued when an API frontend
// restarts. The file is written atomically (a temporary file renamed
// over it) after every call that changed something, and read by New.
// What tests inject (Throttle, Deny, FailOperations) and the call
// counts are not kept.

// savedState is the state file's content.
type savedState struct {
	// Addr is the API's listen address: a restarted fake serves the
	// endpoint berth was given.
	Addr string `json:"addr"`
	// SSHPort is the instances' SSH port, which berth's config names.
	SSHPort int `json:"ssh_port"`
	// ServiceAccountKey is the PKCS #8 key of the service account key
	// file handed out: tokens must keep being granted for it.
	ServiceAccountKey []byte `json:"service_account_key"`
	// AuthorizedKey is the template's SSH key.
	AuthorizedKey string            `json:"authorized_key"`
	TargetSize    int               `json:"target_size"`
	TargetSusp    int               `json:"target_suspended_size"`
	Seq           int               `json:"seq"`
	Peak          int               `json:"peak"`
	Stockout      string            `json:"stockout,omitempty"`
	Order         []string          `json:"order"`
	Instances     []savedInstance   `json:"instances"`
	Operations    []savedOp         `json:"operations"`
	Requests      map[string]string `json:"requests"`
	Tokens        []string          `json:"tokens"`
}

type savedInstance struct {
	Instance
	HostKeySeed []byte    `json:"host_key_seed"`
	VisibleAt   time.Time `json:"visible_at"`
	ExistsAt    time.Time `json:"exists_at"`
	KeysAt      time.Time `json:"keys_at"`
	Until       time.Time `json:"until"`
	Home        string    `json:"home"`
}

type savedOp struct {
	Name, Scope, Type, Target string
	ID                        uint64
	Start, DoneAt             time.Time
	Failed                    bool
}

// snapshotLocked is the project as the state file keeps it.
func (c *Cloud) snapshotLocked() savedState {
	der, err := x509.MarshalPKCS8PrivateKey(c.saKey)
	if err != nil {
		panic(err) // an RSA key always marshals
	}
	s := savedState{Addr: c.srv.Listener.Addr().String(), SSHPort: c.port, ServiceAccountKey: der, AuthorizedKey: c.opts.AuthorizedKey,
		TargetSize: c.group.targetSize, TargetSusp: c.group.targetSusp, Seq: c.seq, Peak: c.peak, Stockout: c.stockout,
		Order: c.order, Requests: c.requests}
	for _, name := range c.order {
		in := c.instances[name]
		if in == nil {
			continue
		}
		cp := *in
		cp.sshd, cp.signer = nil, nil
		s.Instances = append(s.Instances, savedInstance{Instance: cp, HostKeySeed: in.seed, VisibleAt: in.visibleAt,
			ExistsAt: in.existsAt, KeysAt: in.keysAt, Until: in.until, Home: in.home})
	}
	for _, op := range c.ops {
		s.Operations = append(s.Operations, savedOp{Name: op.name, Scope: op.scope, Type: op.opType, Target: op.target,
			ID: op.id, Start: op.start, DoneAt: op.doneAt, Failed: op.failed})
	}
	for tok := range c.tokens {
		s.Tokens = append(s.Tokens, tok)
	}
	return s
}

// saveLocked writes the state file when the state changed since the
// last write. A failure is printed: the fake goes on serving, as the
// project it stands for would.
func (c *Cloud) saveLocked() {
	if c.state == nil {
		return
	}
	if err := c.state.Save(c.snapshotLocked()); err != nil {
		fmt.Fprintf(os.Stderr, "gcpfake: saving the state: %v\n", err)
	}
}

// loadState reads the state file into c, if there is one; it returns
// the saved listen address ("" for a new project).
func (c *Cloud) loadState() (string, error) {
	c.state = &fakestate.File{Path: c.opts.State}
	var s savedState
	if found, err := c.state.Load(&s); err != nil || !found {
		return "", err
	}
	key, err := x509.ParsePKCS8PrivateKey(s.ServiceAccountKey)
	rsaKey, ok := key.(*rsa.PrivateKey)
	if err != nil || !ok {
		return "", fmt.Errorf("gcpfake: state file %s: no service account key (%v); remove it to start a new project", c.opts.State, err)
	}
	c.saKey, c.port, c.opts.AuthorizedKey = rsaKey, s.SSHPort, s.AuthorizedKey
	c.group.targetSize, c.group.targetSusp, c.seq, c.peak, c.stockout = s.TargetSize, s.TargetSusp, s.Seq, s.Peak, s.Stockout
	c.order = s.Order
	for _, si := range s.Instances {
		in := si.Instance
		in.seed, in.visibleAt, in.existsAt, in.keysAt, in.until, in.home = si.HostKeySeed, si.VisibleAt, si.ExistsAt, si.KeysAt, si.Until, si.Home
		if len(in.seed) != ed25519.SeedSize {
			return "", fmt.Errorf("gcpfake: state file %s: instance %s has no host key", c.opts.State, in.Name)
		}
		if in.signer, err = ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(in.seed)); err != nil {
			return "", err
		}
		c.instances[in.Name] = &in
	}
	for _, so := range s.Operations {
		c.ops[so.Name] = &operation{name: so.Name, scope: so.Scope, opType: so.Type, target: so.Target, id: so.ID,
			start: so.Start, doneAt: so.DoneAt, failed: so.Failed}
	}
	if s.Requests != nil {
		c.requests = s.Requests
	}
	for _, tok := range s.Tokens {
		c.tokens[tok] = true
	}
	return s.Addr, nil
}

// startSavedSSHLocked starts the SSH servers of the loaded instances that
// run: their VMs kept running while the API was away.
func (c *Cloud) startSavedSSHLocked() {
	for _, in := range c.instances {
		if !in.Gone && in.Failing == "" && in.Status == StatusRunning && in.Action == ActionNone {
			c.startSSHLocked(in)
		}
	}
}
