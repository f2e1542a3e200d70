package awsfake

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/berth-ci/berth/internal/fakehost"
	"github.com/berth-ci/berth/internal/fakestate"
	"golang.org/x/crypto/ssh"
)

// Lifecycle states of an instance in an Auto Scaling group, as AWS spells
// them.
const (
	LifecyclePending         = "Pending"
	LifecycleInService       = "InService"
	LifecycleEnteringStandby = "EnteringStandby"
	LifecycleStandby         = "Standby"
	LifecycleTerminating     = "Terminating"
	LifecycleTerminated      = "Terminated"
)

// EC2 instance states and their codes, as AWS spells them.
const (
	EC2Pending      = "pending"
	EC2Running      = "running"
	EC2ShuttingDown = "shutting-down"
	EC2Terminated   = "terminated"
	EC2Stopping     = "stopping"
	EC2Stopped      = "stopped"
)

var ec2Codes = map[string]int{EC2Pending: 0, EC2Running: 16, EC2ShuttingDown: 32, EC2Terminated: 48, EC2Stopping: 64, EC2Stopped: 80}

// ConsoleFormat chooses what an instance's console output reveals.
type ConsoleFormat int

// Console output formats.
const (
	// ConsoleKeys prints both cloud-init blocks: fingerprints and keys.
	ConsoleKeys ConsoleFormat = iota
	// ConsoleFingerprints prints only the fingerprint block, as images
	// that set ssh_fp_console_blacklist-style options do.
	ConsoleFingerprints
	// ConsoleEmpty prints nothing, like an image without cloud-init or an
	// instance whose console output is not captured yet.
	ConsoleEmpty
)

// Options shape the fake cloud. Zero durations mean "at once".
type Options struct {
	// Region is the region the fake claims; default "eu-west-1".
	Region string
	// Group is the one Auto Scaling group's name; default "berth-ci".
	Group string
	// MinSize and MaxSize bound the group; MaxSize defaults to 10.
	MinSize, MaxSize int
	// Username is the OS user the instances' SSH servers accept; default
	// "ec2-user".
	Username string
	// AuthorizedKey is the group's key pair, authorized_keys format: the
	// public half of what the launch template's KeyName installs.
	AuthorizedKey string
	// BootTime is how long an instance stays pending; StopTime how long it
	// stays stopping; TerminateTime how long it stays shutting-down.
	BootTime, StopTime, TerminateTime time.Duration
	// LifecycleTime is how long an instance stays EnteringStandby after
	// EnterStandby, and Pending after ExitStandby, before the group moves
	// it on to Standby or InService.
	LifecycleTime time.Duration
	// ListingLag is how long after launch an instance first appears in
	// DescribeAutoScalingGroups and DescribeInstances.
	ListingLag time.Duration
	// PageSize caps how many items one page holds, whatever MaxRecords or
	// MaxResults asked for (AWS may return fewer); 0 means no cap.
	PageSize int
	// Spot makes the group launch only Spot instances (a mixed instances
	// policy with no On-Demand share); they are one-time requests, so
	// StopInstances refuses them, as AWS does.
	Spot bool
	// Console chooses what GetConsoleOutput reveals.
	Console ConsoleFormat
	// Dir holds the instances' home directories; default a temp dir
	// removed by Close.
	Dir string
	// Clock returns the cloud's time; default time.Now. Tests that step
	// through listing lag or boots deterministically pass their own.
	Clock func() time.Time
	// Addr is the API's listen address; default the one the state file
	// saved, else a free loopback port.
	Addr string
	// State is a file that keeps the region across a restart of the fake
	// (state.go): read by New when it exists, written after every change.
	// It needs Dir, which holds the instances' disks.
	State string
}

// Cloud is a fake AWS region holding one Auto Scaling group.
type Cloud struct {
	opts   Options
	srv    *httptest.Server
	port   int
	ownDir bool

	mu        sync.Mutex
	group     group
	instances map[string]*Instance
	order     []string // launch order, for stable listings
	seq       int
	throttle  map[string]int
	denied    map[string]bool
	calls     map[string]int
	eicKeys   map[string][]eicKey
	now       func() time.Time
	state     *fakestate.File // nil without Options.State
}

type group struct {
	name                      string
	min, max, desired         int
	newInstancesProtected     bool
	availabilityZone, itype   string
	launchTemplate, ltVersion string
}

type eicKey struct {
	user    string
	key     ssh.PublicKey
	expires time.Time
}

// moveLocked starts a lifecycle transition through via to to, which
// takes LifecycleTime.
func (c *Cloud) moveLocked(in *Instance, via, to string) {
	if c.opts.LifecycleTime == 0 {
		in.Lifecycle = to
		return
	}
	in.Lifecycle, in.lcNext, in.lcUntil = via, to, c.now().Add(c.opts.LifecycleTime)
}

// Instance is one fake EC2 instance. Read it through Cloud.Instance, which
// returns a copy.
type Instance struct {
	ID        string
	Lifecycle string // Auto Scaling lifecycle state; "" once it left the group
	Health    string // "Healthy" or "Unhealthy"
	Protected bool   // scale-in protection
	State     string // EC2 state
	PrivateIP string
	PublicIP  string
	Launched  time.Time
	HostKey   string // authorized_keys format

	visibleAt time.Time
	until     time.Time // end of the current transitional EC2 state
	afterBoot string    // lifecycle to enter when pending ends
	lcNext    string    // lifecycle to enter at lcUntil (standby moves)
	lcUntil   time.Time
	home      string
	seed      []byte // the host key's ed25519 seed, for the state file
	signer    ssh.Signer
	sshd      *fakehost.Server
}

// New starts a fake cloud with its HTTP endpoint. Close it when done.
func New(opts Options) (*Cloud, error) {
	if opts.Region == "" {
		opts.Region = "eu-west-1"
	}
	if opts.Group == "" {
		opts.Group = "berth-ci"
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = 10
	}
	if opts.Username == "" {
		opts.Username = "ec2-user"
	}
	c := &Cloud{opts: opts, instances: map[string]*Instance{}, throttle: map[string]int{},
		denied: map[string]bool{}, calls: map[string]int{}, eicKeys: map[string][]eicKey{}, now: opts.Clock}
	if c.now == nil {
		c.now = time.Now
	}
	if c.opts.State != "" && c.opts.Dir == "" {
		return nil, fmt.Errorf("awsfake: a state file needs Dir, where the instances' disks outlive the fake")
	}
	c.group = group{name: opts.Group, min: opts.MinSize, max: opts.MaxSize, desired: opts.MinSize,
		availabilityZone: opts.Region + "a", itype: "t3.micro", launchTemplate: "lt-0123456789abcdef0", ltVersion: "1"}
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
	if c.opts.Dir == "" {
		d, err := os.MkdirTemp("", "awsfake-")
		if err != nil {
			return nil, err
		}
		c.opts.Dir, c.ownDir = d, true
	}
	// One port for every instance, on a distinct loopback address each, so
	// the provider's ssh_port setting works as it does with a real fleet.
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
		return nil, fmt.Errorf("awsfake: API address: %w", err)
	}
	c.srv = httptest.NewUnstartedServer(c)
	c.srv.Listener.Close()
	c.srv.Listener = ln
	c.srv.Start()
	c.mu.Lock()
	c.startSavedSSHLocked()
	c.advanceLocked()
	c.saveLocked()
	c.mu.Unlock()
	return c, nil
}

// URL is the endpoint to give the SDK (BaseEndpoint).
func (c *Cloud) URL() string { return c.srv.URL }

// SSHPort is the port every instance's SSH server listens on.
func (c *Cloud) SSHPort() int { return c.port }

// Region is the region the fake claims.
func (c *Cloud) Region() string { return c.opts.Region }

// Close stops the endpoint and every instance's SSH server.
func (c *Cloud) Close() {
	c.srv.Close()
	c.mu.Lock()
	for _, in := range c.instances {
		if in.sshd != nil {
			in.sshd.Close()
			in.sshd = nil
		}
	}
	c.mu.Unlock()
	if c.ownDir {
		os.RemoveAll(c.opts.Dir)
	}
}

// Throttle makes the next n calls of action (any action when "") fail with
// the service's throttling error.
func (c *Cloud) Throttle(action string, n int) {
	c.mu.Lock()
	c.throttle[action] += n
	c.mu.Unlock()
}

// Deny makes every call of action fail with the service's access-denied
// error, as a missing IAM permission does; Deny(action, false) allows it
// again.
func (c *Cloud) Deny(action string, deny bool) {
	c.mu.Lock()
	c.denied[action] = deny
	c.mu.Unlock()
}

// Calls returns how many times action was called, refused ones included.
func (c *Cloud) Calls(action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[action]
}

// SetDesired sets the group's desired capacity as another actor (a person
// in the console, a scaling policy) would.
func (c *Cloud) SetDesired(n int) {
	c.mu.Lock()
	c.group.desired = n
	c.advanceLocked()
	c.mu.Unlock()
}

// GroupState is a snapshot of the group's sizes.
type GroupState struct {
	Min, Max, Desired int
	// InGroup counts instances the group holds in any lifecycle state.
	InGroup int
}

// Group returns the group's sizes now.
func (c *Cloud) Group() GroupState {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	g := GroupState{Min: c.group.min, Max: c.group.max, Desired: c.group.desired}
	for _, in := range c.instances {
		if in.Lifecycle != "" {
			g.InGroup++
		}
	}
	return g
}

// Instance returns a copy of the instance with the given ID.
func (c *Cloud) Instance(id string) (Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	in, ok := c.instances[id]
	if !ok {
		return Instance{}, false
	}
	cp := *in
	cp.sshd, cp.signer = nil, nil
	return cp, true
}

// Instances returns the IDs of every instance ever launched, in launch order.
func (c *Cloud) Instances() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	return append([]string(nil), c.order...)
}

// MarkUnhealthy fails the instance's health check: the group terminates it
// and launches a replacement, without being asked.
func (c *Cloud) MarkUnhealthy(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, ok := c.instances[id]
	if !ok || in.Lifecycle == "" {
		return fmt.Errorf("awsfake: %s is not in the group", id)
	}
	in.Health = "Unhealthy"
	c.advanceLocked()
	return nil
}

// advanceLocked applies every change due by now: boots, stops and
// terminations that finished, health-check replacements, and the group's
// convergence on its desired capacity.
func (c *Cloud) advanceLocked() {
	now := c.now()
	for _, id := range c.order {
		in := c.instances[id]
		if in.until.IsZero() || now.Before(in.until) {
			continue
		}
		in.until = time.Time{}
		switch in.State {
		case EC2Pending:
			in.State = EC2Running
			if in.afterBoot != "" {
				in.Lifecycle, in.afterBoot = in.afterBoot, ""
			}
			c.startSSHLocked(in)
		case EC2Stopping:
			in.State = EC2Stopped
		case EC2ShuttingDown:
			in.State = EC2Terminated
			in.Lifecycle = ""
		}
	}
	for _, id := range c.order {
		in := c.instances[id]
		if in.lcNext != "" && !now.Before(in.lcUntil) && in.Lifecycle != LifecycleTerminating && in.Lifecycle != "" {
			in.Lifecycle, in.lcNext = in.lcNext, ""
		}
	}
	// The EC2 health check: an InService instance that is unhealthy or not
	// running is replaced.
	for _, id := range c.order {
		in := c.instances[id]
		if in.Lifecycle == LifecycleInService && (in.Health != "Healthy" || in.State != EC2Running) {
			c.terminateLocked(in)
		}
	}
	c.convergeLocked(now)
}

// convergeLocked launches or terminates instances until the group holds its
// desired capacity, never terminating a protected instance.
func (c *Cloud) convergeLocked(now time.Time) {
	var live []*Instance
	for _, id := range c.order {
		in := c.instances[id]
		if in.Lifecycle == LifecyclePending || in.Lifecycle == LifecycleInService {
			live = append(live, in)
		}
	}
	for n := len(live); n < c.group.desired; n++ {
		c.launchLocked(now)
	}
	excess := len(live) - c.group.desired
	// Scale-in picks the newest unprotected instances first (a stand-in
	// for AWS's default termination policy, which also never picks a
	// protected instance).
	sort.SliceStable(live, func(i, j int) bool { return live[i].Launched.After(live[j].Launched) })
	for _, in := range live {
		if excess <= 0 {
			break
		}
		if !in.Protected {
			c.terminateLocked(in)
			excess--
		}
	}
}

func (c *Cloud) launchLocked(now time.Time) {
	c.seq++
	id := fmt.Sprintf("i-0abc%013x", c.seq)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		panic(err)
	}
	seed := priv.Seed()
	home := filepath.Join(c.opts.Dir, id)
	if err := os.MkdirAll(home, 0o700); err != nil {
		panic(fmt.Sprintf("awsfake: home of %s: %v", id, err))
	}
	in := &Instance{
		ID: id, Lifecycle: LifecyclePending, Health: "Healthy", Protected: c.group.newInstancesProtected,
		State: EC2Pending, Launched: now, visibleAt: now.Add(c.opts.ListingLag), until: now.Add(c.opts.BootTime),
		afterBoot: LifecycleInService, home: home, signer: signer, seed: seed,
		PrivateIP: fmt.Sprintf("127.0.%d.%d", c.seq/250, c.seq%250+2),
		PublicIP:  fmt.Sprintf("127.1.%d.%d", c.seq/250, c.seq%250+2),
		HostKey:   string(ssh.MarshalAuthorizedKey(signer.PublicKey())),
	}
	in.HostKey = in.HostKey[:len(in.HostKey)-1]
	c.instances[id] = in
	c.order = append(c.order, id)
	if in.until.Equal(now) || c.opts.BootTime == 0 {
		in.until = time.Time{}
		in.State, in.Lifecycle, in.afterBoot = EC2Running, LifecycleInService, ""
		c.startSSHLocked(in)
	}
}

// terminateLocked starts terminating an instance: it stays in the group as
// Terminating until EC2 has shut it down.
func (c *Cloud) terminateLocked(in *Instance) {
	in.Lifecycle = LifecycleTerminating
	in.afterBoot, in.lcNext = "", ""
	c.stopSSHLocked(in)
	if c.opts.TerminateTime == 0 {
		in.State, in.Lifecycle, in.until = EC2Terminated, "", time.Time{}
		return
	}
	in.State, in.until = EC2ShuttingDown, c.now().Add(c.opts.TerminateTime)
}

func (c *Cloud) startSSHLocked(in *Instance) {
	if in.sshd != nil {
		return
	}
	s, err := startSSH(c, in)
	if err != nil {
		// The instance is then unreachable, as a broken one is; the
		// provider's tests see that as an SSH failure.
		fmt.Fprintf(os.Stderr, "awsfake: SSH server of %s: %v\n", in.ID, err)
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

// authorized reports whether key may log in as user on instance id: the
// group's key pair, or a key pushed by SendSSHPublicKey in the last 60 s.
func (c *Cloud) authorized(id, user string, key ssh.PublicKey) bool {
	if user != c.opts.Username {
		return false
	}
	if c.opts.AuthorizedKey != "" {
		if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(c.opts.AuthorizedKey)); err == nil && string(k.Marshal()) == string(key.Marshal()) {
			return true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.eicKeys[id] {
		if k.user == user && c.now().Before(k.expires) && string(k.key.Marshal()) == string(key.Marshal()) {
			return true
		}
	}
	return false
}
