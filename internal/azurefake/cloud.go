package azurefake

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/berth-ci/berth/internal/fakehost"
	"github.com/berth-ci/berth/internal/fakestate"
	"golang.org/x/crypto/ssh"
)

// Provisioning and power states of a scale set instance, as ARM spells them
// (the codes are "ProvisioningState/<p>" and "PowerState/<s>").
const (
	ProvisioningCreating  = "Creating"
	ProvisioningUpdating  = "Updating"
	ProvisioningSucceeded = "Succeeded"
	ProvisioningDeleting  = "Deleting"
	ProvisioningFailed    = "Failed"

	PowerStarting     = "starting"
	PowerRunning      = "running"
	PowerDeallocating = "deallocating"
	PowerDeallocated  = "deallocated"
)

// Options shape the fake cloud. Zero durations mean "at once".
type Options struct {
	// Subscription, ResourceGroup, ScaleSet and Location name the one
	// scale set; defaults 00000000-0000-0000-0000-000000000000, "berth",
	// "berth-ci", "westeurope".
	Subscription, ResourceGroup, ScaleSet, Location string
	// TenantID, ClientID and ClientSecret are the one service principal
	// the token endpoint accepts; defaults a fixed tenant and client ID
	// and the secret "fake-secret".
	TenantID, ClientID, ClientSecret string
	// AdminUsername is the OS profile's admin user, the only login the
	// instances' SSH servers accept; default "azureuser".
	AdminUsername string
	// AuthorizedKey is the OS profile's SSH public key, authorized_keys
	// format.
	AuthorizedKey string
	// VMSize is the set's SKU name; default Standard_D2s_v5.
	VMSize string
	// Spot makes the set's instances Spot priority with EvictionPolicy
	// (default "Delete").
	Spot           bool
	EvictionPolicy string
	// MaxCapacity is the most instances the set may hold (the platform's
	// limit, or a quota); default 1000.
	MaxCapacity int
	// BootTime is how long a new instance stays creating; StartTime how
	// long a started one stays starting; DeallocateTime how long one stays
	// deallocating; DeleteTime how long one stays deleting.
	BootTime, StartTime, DeallocateTime, DeleteTime time.Duration
	// ListingLag is how long after launch an instance first appears in
	// the instance listing.
	ListingLag time.Duration
	// PollInterval is what long-running operations' Retry-After tells the
	// poller; default 1 s. Below a second it is sent as
	// x-ms-retry-after-ms, the millisecond form ARM services use.
	PollInterval time.Duration
	// RetryAfter is what a throttled call's Retry-After says; default 1 s.
	RetryAfter time.Duration
	// PageSize caps how many instances one listing page holds; 0 means
	// 100, as ARM pages compute listings.
	PageSize int
	// Dir holds the instances' OS disks (home directories); default a
	// temp dir removed by Close.
	Dir string
	// NoOverprovision creates the set with overprovision false, as
	// docs/azure.md asks. The zero value is Azure's default: a set is
	// overprovisioned unless created otherwise (armcompute
	// VirtualMachineScaleSetProperties.Overprovision, "Specifies whether
	// the Virtual Machine Scale Set should be overprovisioned"; az vmss
	// create's --disable-overprovision).
	NoOverprovision bool
	// AllocationFailure, when set, is the code every new instance fails
	// allocation with (failures.go); see Cloud.AllocationFailure.
	AllocationFailure string
	// CoreQuota is the region's vCPU quota for the set's VM size; 0 means
	// none. See Cloud.SetCoreQuota.
	CoreQuota int
	// StateFile, when set, keeps the subscription across restarts: read at
	// New, written atomically after every change (state.go).
	StateFile string
	// Addr is the address the ARM endpoint listens on; default a free
	// loopback port (or the one in StateFile).
	Addr string
}

// Cloud is a fake Azure subscription holding one scale set.
type Cloud struct {
	opts   Options
	srv    *httptest.Server
	port   int
	ownDir bool

	mu        sync.Mutex
	capacity  int
	instances map[string]*Instance // by instance ID ("0", "1", ...)
	order     []string
	seq       int
	ops       map[string]*operation
	tokens    map[string]time.Time
	throttle  map[string]int
	denied    map[string]bool
	failNext  map[string]apiError
	calls     map[string]int
	sas       string // signature of the boot diagnostics SAS URIs

	throttledUntil map[string]time.Time // ThrottleFor windows, by action
	early          map[string]int       // calls made inside them after the first refusal
	told           map[string]bool      // whether a window's first refusal was given
	launchFailure  string               // allocation code for this launch batch (FailNext)
	state          fakestate.File       // Options.StateFile and its last content
}

// operation is a long-running operation: InProgress until done, then
// Succeeded, or Failed with err.
type operation struct {
	name    string
	started time.Time
	done    time.Time
	err     *apiError
}

// Instance is one fake scale set instance. Read it through Cloud.Instance,
// which returns a copy.
type Instance struct {
	InstanceID   string
	Name         string
	Provisioning string
	Power        string
	PrivateIP    string
	PublicIP     string
	Created      time.Time
	HostKey      string // authorized_keys format
	// Gone is set once the instance was deleted: it is no longer listed.
	Gone bool
	// FailureCode is the allocation error a Failed instance carries
	// (AllocationFailed); "" otherwise.
	FailureCode string

	visibleAt time.Time
	until     time.Time // end of the current transition
	home      string
	seed      []byte // ed25519 seed of the host key, for the state file
	signer    ssh.Signer
	sshd      *fakehost.Server
}

// New starts a fake cloud with its HTTPS endpoint. Close it when done.
func New(opts Options) (*Cloud, error) {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&opts.Subscription, "00000000-0000-0000-0000-000000000000")
	def(&opts.ResourceGroup, "berth")
	def(&opts.ScaleSet, "berth-ci")
	def(&opts.Location, "westeurope")
	def(&opts.TenantID, "11111111-1111-1111-1111-111111111111")
	def(&opts.ClientID, "22222222-2222-2222-2222-222222222222")
	def(&opts.ClientSecret, "fake-secret")
	def(&opts.AdminUsername, "azureuser")
	def(&opts.VMSize, "Standard_D2s_v5")
	if opts.Spot {
		def(&opts.EvictionPolicy, "Delete")
	}
	if opts.MaxCapacity == 0 {
		opts.MaxCapacity = 1000
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Second
	}
	if opts.RetryAfter == 0 {
		opts.RetryAfter = time.Second
	}
	if opts.PageSize == 0 {
		opts.PageSize = 100
	}
	c := &Cloud{opts: opts, instances: map[string]*Instance{}, ops: map[string]*operation{}, tokens: map[string]time.Time{},
		throttle: map[string]int{}, denied: map[string]bool{}, failNext: map[string]apiError{}, calls: map[string]int{}, sas: randomHex(16),
		throttledUntil: map[string]time.Time{}, early: map[string]int{}, told: map[string]bool{}}
	if c.opts.Dir == "" {
		d, err := os.MkdirTemp("", "azurefake-")
		if err != nil {
			return nil, err
		}
		c.opts.Dir, c.ownDir = d, true
	}
	st, err := c.loadState()
	if err != nil {
		return nil, err
	}
	// One port for every instance, on a distinct loopback address each, so
	// the provider's ssh_port setting works as it does with a real set.
	c.port = st.SSHPort
	if c.port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		c.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	l, err := net.Listen("tcp", cmp.Or(c.opts.Addr, st.Addr, "127.0.0.1:0"))
	if err != nil {
		return nil, fmt.Errorf("azurefake: endpoint: %w", err)
	}
	c.srv = httptest.NewUnstartedServer(c)
	c.srv.Listener.Close()
	c.srv.Listener = l
	c.srv.StartTLS()
	c.mu.Lock()
	c.advanceLocked()
	for _, in := range c.instances {
		if !in.Gone && in.Power == PowerRunning {
			c.startSSHLocked(in)
		}
	}
	c.changedLocked()
	c.mu.Unlock()
	return c, nil
}

// URL is the ARM endpoint, and the authority host too.
func (c *Cloud) URL() string { return c.srv.URL }

// CACertPEM is the PEM of the certificate the endpoint serves, for the
// provider's ca_file.
func (c *Cloud) CACertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw})
}

// SSHPort is the port every instance's SSH server listens on.
func (c *Cloud) SSHPort() int { return c.port }

// Options returns the options the cloud runs with, defaults filled in.
func (c *Cloud) Options() Options { return c.opts }

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

// Throttle makes the next n calls of action (any action when "") fail with
// 429 Too Many Requests and Retry-After. Actions are named in Calls.
func (c *Cloud) Throttle(action string, n int) {
	c.mu.Lock()
	c.throttle[action] += n
	c.mu.Unlock()
}

// Deny makes every call of action fail with 403 AuthorizationFailed naming
// the RBAC action, as a role without it does; Deny(action, false) allows it
// again.
func (c *Cloud) Deny(action string, deny bool) {
	c.mu.Lock()
	c.denied[action] = deny
	c.mu.Unlock()
}

// FailNext makes the next long-running operation of action (UpdateScaleSet,
// DeleteInstances, Deallocate, Start) end Failed with code and message,
// after the instances' state changed as far as it would have; the way an
// allocation failure on start or a quota on scale-out looks.
func (c *Cloud) FailNext(action, code, message string) {
	c.mu.Lock()
	c.failNext[action] = apiError{status: 200, code: code, message: message}
	c.mu.Unlock()
}

// Calls returns how many times action was called, refused ones included:
// Token, GetScaleSet, UpdateScaleSet, DeleteInstances, Deallocate, Start,
// ListVMs, GetVM, BootDiagnostics, ListNICs, ListPublicIPs, GetOperation.
func (c *Cloud) Calls(action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[action]
}

// Capacity returns the set's sku.capacity now.
func (c *Cloud) Capacity() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	return c.capacity
}

// SetCapacity sets sku.capacity as another actor (the portal, an autoscale
// rule) would.
func (c *Cloud) SetCapacity(n int) {
	c.mu.Lock()
	c.capacity = n
	c.advanceLocked()
	c.changedLocked()
	c.mu.Unlock()
}

// Instance returns a copy of the instance with the given name ("set_3").
func (c *Cloud) Instance(name string) (Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	for _, in := range c.instances {
		if in.Name == name {
			cp := *in
			cp.sshd, cp.signer = nil, nil
			return cp, true
		}
	}
	return Instance{}, false
}

// Instances returns the names of every instance ever launched, in launch
// order.
func (c *Cloud) Instances() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	var out []string
	for _, id := range c.order {
		out = append(out, c.instances[id].Name)
	}
	return out
}

// Live returns the names of the instances the set holds (not deleted,
// deleting ones included), in launch order.
func (c *Cloud) Live() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked()
	var out []string
	for _, id := range c.order {
		if in := c.instances[id]; !in.Gone {
			out = append(out, in.Name)
		}
	}
	return out
}

// advanceLocked applies every change due by now: boots, starts,
// deallocations and deletions that finished, and the set's convergence on
// its capacity.
func (c *Cloud) advanceLocked() {
	now := time.Now()
	for _, id := range c.order {
		in := c.instances[id]
		if in.Gone || in.until.IsZero() || now.Before(in.until) {
			continue
		}
		c.finishLocked(in)
	}
	c.convergeLocked(now)
}

// finishLocked ends an instance's transition.
func (c *Cloud) finishLocked(in *Instance) {
	in.until = time.Time{}
	switch {
	case in.Provisioning == ProvisioningDeleting:
		in.Gone = true
		c.stopSSHLocked(in)
	case in.Power == PowerStarting:
		in.Provisioning, in.Power = ProvisioningSucceeded, PowerRunning
		c.startSSHLocked(in)
	case in.Power == PowerDeallocating:
		in.Provisioning, in.Power = ProvisioningSucceeded, PowerDeallocated
	}
}

// liveLocked lists the instances the set counts against its capacity: every one
// not deleting or gone, deallocated ones included (as Azure counts them).
func (c *Cloud) liveLocked() []*Instance {
	var live []*Instance
	for _, id := range c.order {
		in := c.instances[id]
		if !in.Gone && in.Provisioning != ProvisioningDeleting {
			live = append(live, in)
		}
	}
	return live
}

// convergeLocked launches instances until the set holds its capacity, or
// deletes the highest instance IDs when it holds more.
func (c *Cloud) convergeLocked(now time.Time) {
	live := c.liveLocked()
	for n := len(live); n < c.capacity; n++ {
		c.launchLocked(now)
	}
	for i := len(live) - 1; i >= c.capacity; i-- {
		c.deleteLocked(live[i], now)
	}
}

// transitionLocked starts a state change that ends after d (at once when d is 0).
func (c *Cloud) transitionLocked(in *Instance, prov, power string, d time.Duration, now time.Time) {
	in.Provisioning, in.Power = prov, power
	in.until = now.Add(d)
	if d == 0 {
		c.finishLocked(in)
	}
}

func (c *Cloud) launchLocked(now time.Time) {
	id := strconv.Itoa(c.seq)
	c.seq++
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed) // crypto/rand does not fail on Linux
	priv := ed25519.NewKeyFromSeed(seed)
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		panic(err)
	}
	name := c.opts.ScaleSet + "_" + id
	home := filepath.Join(c.opts.Dir, name)
	if err := os.MkdirAll(home, 0o700); err != nil {
		panic(fmt.Sprintf("azurefake: OS disk of %s: %v", name, err))
	}
	n := c.seq
	in := &Instance{
		InstanceID: id, Name: name, Created: now, visibleAt: now.Add(c.opts.ListingLag), home: home, signer: signer, seed: seed,
		PrivateIP: fmt.Sprintf("127.2.%d.%d", n/250, n%250+2),
		PublicIP:  fmt.Sprintf("127.3.%d.%d", n/250, n%250+2),
		HostKey:   string(ssh.MarshalAuthorizedKey(signer.PublicKey())),
	}
	in.HostKey = in.HostKey[:len(in.HostKey)-1]
	c.instances[id] = in
	c.order = append(c.order, id)
	if code := cmp.Or(c.launchFailure, c.opts.AllocationFailure); code != "" {
		c.failAllocationLocked(in, code)
		return
	}
	c.transitionLocked(in, ProvisioningCreating, PowerStarting, c.opts.BootTime, now)
}

func (c *Cloud) deleteLocked(in *Instance, now time.Time) {
	c.stopSSHLocked(in)
	c.transitionLocked(in, ProvisioningDeleting, in.Power, c.opts.DeleteTime, now)
}

func (c *Cloud) startSSHLocked(in *Instance) {
	if in.sshd != nil {
		return
	}
	s, err := startSSH(c, in)
	if err != nil {
		// The instance is then unreachable, as a broken one is.
		fmt.Fprintf(os.Stderr, "azurefake: SSH server of %s: %v\n", in.Name, err)
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

// authorized reports whether key may log in as user: the OS profile's
// admin user with its key.
func (c *Cloud) authorized(user string, key ssh.PublicKey) bool {
	if user != c.opts.AdminUsername || c.opts.AuthorizedKey == "" {
		return false
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(c.opts.AuthorizedKey))
	return err == nil && string(k.Marshal()) == string(key.Marshal())
}

// Evict evicts a Spot instance as Azure does when it needs the capacity
// back: with eviction policy Delete the instance is deleted and the
// capacity lowered by one (the set does not replace it); with Deallocate it
// is deallocated and keeps its place.
func (c *Cloud) Evict(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.changedLocked()
	c.advanceLocked()
	if !c.opts.Spot {
		return fmt.Errorf("azurefake: the set is not Spot; only Spot instances are evicted")
	}
	for _, in := range c.instances {
		if in.Name != name || in.Gone || in.Provisioning == ProvisioningDeleting {
			continue
		}
		now := time.Now()
		if c.opts.EvictionPolicy == "Deallocate" {
			c.stopSSHLocked(in)
			c.transitionLocked(in, ProvisioningSucceeded, PowerDeallocated, 0, now)
			return nil
		}
		c.capacity--
		c.deleteLocked(in, now)
		return nil
	}
	return fmt.Errorf("azurefake: no instance %s in the set", name)
}
