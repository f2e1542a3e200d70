package gcpfake

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/berth-ci/berth/internal/fakehost"
	"github.com/berth-ci/berth/internal/fakestate"
	"golang.org/x/crypto/ssh"
)

// Instance statuses, as the Compute API spells them.
const (
	StatusProvisioning = "PROVISIONING"
	StatusStaging      = "STAGING"
	StatusRunning      = "RUNNING"
	StatusStopping     = "STOPPING"
	StatusSuspending   = "SUSPENDING"
	StatusSuspended    = "SUSPENDED"
	StatusTerminated   = "TERMINATED"
)

// Current actions of a managed instance, as the Compute API spells them.
const (
	ActionNone     = "NONE"
	ActionCreating = "CREATING"
	ActionDeleting = "DELETING"
	ActionSuspend  = "SUSPENDING"
	ActionResume   = "RESUMING"
)

// Options shape the fake project. Zero durations mean "at once".
type Options struct {
	// Project is the project ID; default "berth-project".
	Project string
	// Zone is the zone of a zonal group; default "europe-west1-b".
	Zone string
	// Region makes the group regional in this region, spreading its
	// instances over Region-b and Region-c; "" makes it zonal in Zone.
	Region string
	// Group is the managed instance group's name; default "berth-ci".
	Group string
	// Username is the OS user the instances' SSH servers accept; default
	// "berth".
	Username string
	// AuthorizedKey is the group's SSH key, authorized_keys format: the
	// template's metadata holds it as ssh-keys "USER:KEY".
	AuthorizedKey string
	// MachineType is the template's machine type; default "e2-small".
	// GPU and memory-optimised families (a2-, a3-, g2-, m1-, m2-, m3-)
	// refuse suspend, as GCE does.
	MachineType string
	// Spot makes the template's instances Spot VMs.
	Spot bool
	// NoGuestAttributes turns guest attributes off (the template lacks
	// enable-guest-attributes), so host keys cannot be read.
	NoGuestAttributes bool
	// BootTime is how long a new or resumed instance takes to run;
	// StopTime how long it stays SUSPENDING or STOPPING before it is
	// suspended or deleted.
	BootTime, StopTime time.Duration
	// OperationTime is how long an operation stays RUNNING before DONE.
	OperationTime time.Duration
	// ListingLag is how long after creation an instance first appears in
	// listManagedInstances.
	ListingLag time.Duration
	// CreationLag is how long a new instance is listed before it exists:
	// CREATING, with a name and URL but no id and no instanceStatus
	// (stockout.go).
	CreationLag time.Duration
	// Stockout starts the project in a stockout with this error code (see
	// Cloud.Stockout).
	Stockout string
	// AgentDelay is how long after an instance first runs its guest
	// agent publishes the SSH host keys in its guest attributes.
	AgentDelay time.Duration
	// PageSize caps how many items one page of a listing holds; 0 means
	// maxResults (default 500).
	PageSize int
	// Dir holds the instances' home directories; default a temp dir
	// removed by Close.
	Dir string
	// Clock returns the project's time; default time.Now.
	Clock func() time.Time
	// Addr is the API's listen address; default the one the state file
	// saved, else a free loopback port.
	Addr string
	// State is a file that keeps the project across a restart of the
	// fake (state.go): read by New when it exists, written after every
	// change. It needs Dir, which holds the instances' disks.
	State string
}

// Cloud is a fake Compute Engine project holding one managed instance
// group.
type Cloud struct {
	opts   Options
	srv    *httptest.Server
	port   int
	ownDir bool
	saKey  *rsa.PrivateKey
	// holds are the calls that never arrive (hold.go), apart from mu,
	// which a held call must not take.
	holds holds

	mu        sync.Mutex
	group     group
	instances map[string]*Instance // by name
	order     []string             // creation order, for stable listings
	seq       int
	ops       map[string]*operation
	requests  map[string]string // requestId -> operation name
	throttle  map[string][]int  // method -> statuses of the next refusals
	denied    map[string]bool
	failOps   map[string]int
	calls     map[string]int
	tokens    map[string]bool
	peak      int
	now       func() time.Time
	stockout  string           // error code of every creation attempt now; "" when they succeed
	state     *fakestate.File  // nil without Options.State
	failing   map[string][]int // method -> statuses of the next server errors (servererror.go)
}

type group struct {
	name                    string
	targetSize, targetSusp  int
	zones                   []string
	template, templateScope string
}

// Instance is one fake VM of the group. Read it through Cloud.Instance,
// which returns a copy.
type Instance struct {
	Name, Zone string
	ID         uint64
	Status     string
	Action     string
	PrivateIP  string
	PublicIP   string
	Created    time.Time
	HostKey    string // authorized_keys format
	// Gone is set once the instance was deleted; it is then no longer
	// listed or served.
	Gone bool
	// Failing is the error code of the group's last attempt to create the
	// instance while a stockout lasts (stockout.go): the instance does
	// not exist, and is listed CREATING with no id.
	Failing string

	visibleAt time.Time
	existsAt  time.Time // before it, listed with no id (Options.CreationLag)
	keysAt    time.Time // when the guest agent published the host keys; zero before the first boot
	until     time.Time // end of the current transition
	home      string
	seed      []byte // the host key's ed25519 seed, for the state file
	signer    ssh.Signer
	sshd      *fakehost.Server
}

// New starts a fake project with its HTTP endpoint. Close it when done.
func New(opts Options) (*Cloud, error) {
	if opts.Project == "" {
		opts.Project = "berth-project"
	}
	if opts.Zone == "" {
		opts.Zone = "europe-west1-b"
	}
	if opts.Group == "" {
		opts.Group = "berth-ci"
	}
	if opts.Username == "" {
		opts.Username = "berth"
	}
	if opts.MachineType == "" {
		opts.MachineType = "e2-small"
	}
	c := &Cloud{opts: opts, instances: map[string]*Instance{}, ops: map[string]*operation{}, requests: map[string]string{},
		throttle: map[string][]int{}, denied: map[string]bool{}, failOps: map[string]int{}, calls: map[string]int{},
		tokens: map[string]bool{}, now: opts.Clock, stockout: opts.Stockout}
	if c.now == nil {
		c.now = time.Now
	}
	if c.opts.State != "" && c.opts.Dir == "" {
		return nil, fmt.Errorf("gcpfake: a state file needs Dir, where the instances' disks outlive the fake")
	}
	c.group = group{name: opts.Group, zones: []string{opts.Zone}, template: opts.Group + "-template", templateScope: "global"}
	if opts.Region != "" {
		c.group.zones = []string{opts.Region + "-b", opts.Region + "-c"}
		c.group.templateScope = "regions/" + opts.Region
	}
	addr := opts.Addr
	if c.opts.State != "" {
		saved, err := c.loadState()
		if err != nil {
			return nil, err
		}
		if addr == "" {
			addr = saved
		}
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if c.saKey == nil {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		c.saKey = key
	}
	if c.opts.Dir == "" {
		d, err := os.MkdirTemp("", "gcpfake-")
		if err != nil {
			return nil, err
		}
		c.opts.Dir, c.ownDir = d, true
	}
	// One port for every instance, on a distinct loopback address each.
	if c.port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		c.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gcpfake: API address: %w", err)
	}
	c.srv = httptest.NewUnstartedServer(c)
	c.srv.Listener.Close()
	c.srv.Listener = ln
	c.srv.Start()
	c.mu.Lock()
	c.startSavedSSHLocked()
	c.saveLocked()
	c.mu.Unlock()
	return c, nil
}

// URL is the endpoint to give the client (option.WithEndpoint).
func (c *Cloud) URL() string { return c.srv.URL }

// SSHPort is the port every instance's SSH server listens on.
func (c *Cloud) SSHPort() int { return c.port }

// Project is the project ID the fake claims.
func (c *Cloud) Project() string { return c.opts.Project }

// Location is the group's zone, or its region for a regional group.
func (c *Cloud) Location() (zone, region string) {
	if c.opts.Region != "" {
		return "", c.opts.Region
	}
	return c.opts.Zone, ""
}

// Close stops the endpoint and every instance's SSH server.
func (c *Cloud) Close() {
	c.srv.Close()
	c.mu.Lock()
	for _, in := range c.instances {
		c.stopSSHLocked(in)
	}
	c.mu.Unlock()
	if c.ownDir {
		os.RemoveAll(c.opts.Dir)
	}
}

// Throttle makes the next n calls of method (e.g.
// "instanceGroupManagers.resize"; any method when "") fail with a rate
// limit error: HTTP 429 rateLimitExceeded, or with status 403 the
// 403 rateLimitExceeded Compute Engine also sends.
func (c *Cloud) Throttle(method string, n, status int) {
	c.mu.Lock()
	for range n {
		c.throttle[method] = append(c.throttle[method], status)
	}
	c.mu.Unlock()
}

// Deny makes every call of method fail with 403 forbidden, as a missing
// IAM permission does; Deny(method, false) allows it again.
func (c *Cloud) Deny(method string, deny bool) {
	c.mu.Lock()
	c.denied[method] = deny
	c.mu.Unlock()
}

// FailOperations makes the operations of the next n calls of method end
// DONE with an error instead of succeeding, as a quota shortage does.
func (c *Cloud) FailOperations(method string, n int) {
	c.mu.Lock()
	c.failOps[method] += n
	c.mu.Unlock()
}

// Calls returns how many times method was called, refused ones included.
func (c *Cloud) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// GroupState is a snapshot of the group's sizes.
type GroupState struct {
	TargetSize, TargetSuspendedSize int
	// Live counts instances that exist and are not being deleted.
	Live int
	// Peak is the most instances that ever existed at once.
	Peak int
	// Failing counts members the group fails to create (Stockout): they
	// count in the target size but do not exist.
	Failing int
}

// Group returns the group's sizes now.
func (c *Cloud) Group() GroupState {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	g := GroupState{TargetSize: c.group.targetSize, TargetSuspendedSize: c.group.targetSusp, Peak: c.peak}
	for _, in := range c.instances {
		switch {
		case in.Gone:
		case in.Failing != "":
			g.Failing++
		case in.Action != ActionDeleting:
			g.Live++
		}
	}
	return g
}

// Instance returns a copy of the named instance.
func (c *Cloud) Instance(name string) (Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	in, ok := c.instances[name]
	if !ok {
		return Instance{}, false
	}
	cp := *in
	cp.sshd, cp.signer = nil, nil
	if !in.exists(c.now()) {
		cp.ID = 0 // not created: no ID yet
	}
	return cp, true
}

// Instances returns the names of every instance ever created, in creation
// order.
func (c *Cloud) Instances() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	return append([]string(nil), c.order...)
}

// Preempt stops a Spot instance as Compute Engine does when it reclaims
// the capacity; the group then recreates it under the same name, with a
// new ID and a fresh disk.
func (c *Cloud) Preempt(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, ok := c.instances[name]
	if !ok || in.Gone || in.Status != StatusRunning {
		return fmt.Errorf("gcpfake: %s is not a running instance", name)
	}
	c.stopSSHLocked(in)
	in.Gone = true
	delete(c.instances, name)
	c.createLocked(c.now(), in.Zone, name)
	return nil
}

// advanceLocked applies every change due by now: boots, suspends and
// deletions that finished, and the group's convergence on its target size.
func (c *Cloud) advanceLocked() {
	now := c.now()
	c.retryCreationsLocked(now)
	for _, name := range c.order {
		in := c.instances[name]
		if in == nil || in.Gone || in.until.IsZero() || now.Before(in.until) {
			continue
		}
		c.finishLocked(in)
	}
	live := 0
	for _, name := range c.order {
		in := c.instances[name]
		if in != nil && !in.Gone && in.Action != ActionDeleting && in.Status != StatusSuspended && in.Action != ActionSuspend {
			live++
		}
	}
	for ; live < c.group.targetSize; live++ {
		c.seq++
		zone := c.group.zones[c.seq%len(c.group.zones)]
		c.createLocked(now, zone, fmt.Sprintf("%s-%04x", c.group.name, c.seq*7919%65536))
	}
	exist := 0
	for _, in := range c.instances {
		if !in.Gone && in.Failing == "" {
			exist++
		}
	}
	c.peak = max(c.peak, exist)
}

// finishLocked ends an instance's transition.
func (c *Cloud) finishLocked(in *Instance) {
	in.until = time.Time{}
	switch in.Action {
	case ActionCreating, ActionResume:
		in.Status, in.Action = StatusRunning, ActionNone
		if in.keysAt.IsZero() {
			in.keysAt = c.now().Add(c.opts.AgentDelay)
		}
		c.startSSHLocked(in)
	case ActionSuspend:
		in.Status, in.Action = StatusSuspended, ActionNone
	case ActionDeleting:
		in.Status, in.Gone = StatusTerminated, true
	}
}

// transition starts an instance's change, done after d.
func (c *Cloud) transition(in *Instance, status, action string, d time.Duration) {
	in.Status, in.Action = status, action
	in.until = c.now().Add(d)
	if d == 0 {
		c.finishLocked(in)
	}
}

func (c *Cloud) createLocked(now time.Time, zone, name string) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	seed := priv.Seed()
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		panic(err)
	}
	home := filepath.Join(c.opts.Dir, name)
	os.RemoveAll(home) // a recreated instance gets a fresh disk
	if err := os.MkdirAll(home, 0o700); err != nil {
		panic(fmt.Sprintf("gcpfake: home of %s: %v", name, err))
	}
	n := len(c.order) + 1
	in := &Instance{
		Name: name, Zone: zone, ID: 4_000_000_000_000_000_000 + uint64(n)*104729, Created: now,
		visibleAt: now.Add(c.opts.ListingLag), home: home, signer: signer, seed: seed,
		PrivateIP: fmt.Sprintf("127.2.%d.%d", n/250, n%250+2),
		PublicIP:  fmt.Sprintf("127.3.%d.%d", n/250, n%250+2),
	}
	in.HostKey = string(ssh.MarshalAuthorizedKey(signer.PublicKey()))
	in.HostKey = in.HostKey[:len(in.HostKey)-1]
	c.instances[name] = in
	c.order = append(c.order, name)
	c.attemptCreationLocked(in, now)
}

func (c *Cloud) startSSHLocked(in *Instance) {
	if in.sshd != nil {
		return
	}
	s, err := startSSH(c, in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gcpfake: SSH server of %s: %v\n", in.Name, err)
		return
	}
	in.sshd = s
}

func (c *Cloud) stopSSHLocked(in *Instance) {
	if in.sshd != nil {
		in.sshd.Close()
		in.sshd = nil
	}
}

// authorized reports whether key may log in as user: the template's
// ssh-keys metadata holds exactly USER:KEY.
func (c *Cloud) authorized(user string, key ssh.PublicKey) bool {
	if user != c.opts.Username || c.opts.AuthorizedKey == "" {
		return false
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(c.opts.AuthorizedKey))
	return err == nil && string(k.Marshal()) == string(key.Marshal())
}
