package azure

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/internal/secretfile"
	"github.com/berth-ci/berth/provider"
)

// Version is the version string the group reports in Info.
const Version = "azure/1"

// Platform limits on a Uniform scale set's capacity.
const (
	maxCapacity                = 1000
	maxCapacitySinglePlacement = 100
)

var (
	_ provider.InstanceGroup = (*Group)(nil)
	_ provider.Suspender     = (*Group)(nil)
)

// Group is a virtual machine scale set as a berth instance group. Create
// it with New and configure it with Init.
type Group struct {
	log *slog.Logger

	cfg        Config
	sets       *armcompute.VirtualMachineScaleSetsClient
	vms        *armcompute.VirtualMachineScaleSetVMsClient
	arm        *arm.Client  // raw ARM calls: the two network listings
	http       *http.Client // boot diagnostics blobs
	privateKey []byte
	username   string
	maxSize    int
	vmSize     string
	now        func() time.Time

	// bg bounds the pollers of operations berth does not wait for
	// (scale-out, deletes, deallocations); Shutdown cancels it.
	bg     context.Context
	stopBg context.CancelFunc

	// scaleMu serialises the calls that change the set's capacity
	// (Increase reads it and writes it back; deleteInstances lowers it),
	// because berth makes provider calls concurrently.
	scaleMu sync.Mutex
	// creation backs Increase off after the set failed to create
	// instances (creation.go); scaleMu guards it.
	creation provider.CreationBackoff
	// gate holds calls back until a long Retry-After passed (throttle.go).
	gate *retryGate

	mu         sync.Mutex
	seen       map[string]time.Time // instances listed since start, and when first
	hostKeys   map[string]string    // host keys learnt, by instance
	resuming   map[string]bool      // Resume calls in flight
	suspending map[string]int       // deallocations not yet finished, by sequence number
	suspendSeq int
}

// New returns an uninitialised group; Init configures it from
// provider_config. It is the one constructor, for berth's plugin binary
// (main is sdk.Serve(azure.New())) and for tests alike.
func New() *Group {
	g := &Group{log: slog.Default().With("provider", "azure"), now: time.Now,
		seen: map[string]time.Time{}, hostKeys: map[string]string{}, resuming: map[string]bool{}, suspending: map[string]int{}}
	g.gate = newRetryGate(func() time.Time { return g.now() })
	return g
}

// cloudConfig is the cloud the config names, with its endpoint and
// authority overrides. The SDK's cloud values share their Services map, so
// it is copied before a change.
func cloudConfig(cfg Config) cloud.Configuration {
	c := map[string]cloud.Configuration{"public": cloud.AzurePublic, "usgovernment": cloud.AzureGovernment, "china": cloud.AzureChina}[cfg.Cloud]
	c.Services = maps.Clone(c.Services)
	if cfg.Endpoint != "" {
		rm := c.Services[cloud.ResourceManager]
		rm.Endpoint = cfg.Endpoint
		c.Services[cloud.ResourceManager] = rm
	}
	if cfg.AuthorityHost != "" {
		c.ActiveDirectoryAuthorityHost = strings.TrimSuffix(cfg.AuthorityHost, "/") + "/"
	}
	return c
}

// httpClient trusts the system's roots plus those of ca_file; nil when
// there is no ca_file, for the SDK's default transport.
func httpClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("azure: ca_file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("azure: ca_file %s holds no PEM certificate", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// readKey reads connector.key_path and refuses what ssh cannot use.
func readKey(path string) ([]byte, ssh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("azure: connector.key_path: %w; give the private key whose public half is in the scale set's OS profile", err)
	}
	if err := secretfile.Check(path, "azure: connector.key_path", "log in to every instance of the scale set"); err != nil {
		return nil, nil, err
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, nil, fmt.Errorf("azure: connector.key_path %s is encrypted; berth needs it unencrypted (ssh-keygen -p -N '' -f KEY on a copy)", path)
		}
		return nil, nil, fmt.Errorf("azure: connector.key_path %s: %w", path, err)
	}
	return pem, signer, nil
}

// Init reads provider_config (see Config), builds the clients with Azure's
// default credential chain, and checks that the scale set exists, is a
// Uniform set berth can drive, and that the private key it was given logs
// in to its instances.
func (g *Group) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	cfg, err := ParseConfig(s.Config)
	if err != nil {
		return provider.Info{}, err
	}
	g.cfg = cfg
	pem, signer, err := readKey(cfg.Connector.KeyPath)
	if err != nil {
		return provider.Info{}, err
	}
	// The service principal's certificate, which azidentity's
	// environment credential reads from this path.
	if cert := os.Getenv("AZURE_CLIENT_CERTIFICATE_PATH"); cert != "" && secretfile.Exists(cert) {
		if err := secretfile.Check(cert, "azure: AZURE_CLIENT_CERTIFICATE_PATH", "act as the service principal"); err != nil {
			return provider.Info{}, fmt.Errorf("%w: %w", ErrCredentials, err)
		}
	}
	g.privateKey = pem
	hc, err := httpClient(cfg.CAFile)
	if err != nil {
		return provider.Info{}, err
	}
	g.http = http.DefaultClient
	opts := azcore.ClientOptions{Cloud: cloudConfig(cfg)}
	if hc != nil {
		g.http, opts.Transport = hc, hc
	}
	// The default chain: environment (a service principal's secret or
	// certificate), workload identity, managed identity, Azure CLI,
	// Azure Developer CLI.
	cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
		ClientOptions: opts, DisableInstanceDiscovery: cfg.AuthorityHost != ""})
	if err != nil {
		return provider.Info{}, fmt.Errorf("%w: %w", ErrCredentials, err)
	}
	// The SDK's retry policy (3 retries, exponential backoff, honouring
	// Retry-After on 429 and 5xx up to 60 s) is the default; the gate
	// honours a longer Retry-After (throttle.go).
	opts.PerCallPolicies = append(opts.PerCallPolicies, g.gate)
	armOpts := &arm.ClientOptions{ClientOptions: opts}
	if g.sets, err = armcompute.NewVirtualMachineScaleSetsClient(cfg.SubscriptionID, cred, armOpts); err != nil {
		return provider.Info{}, fmt.Errorf("azure: %w", err)
	}
	if g.vms, err = armcompute.NewVirtualMachineScaleSetVMsClient(cfg.SubscriptionID, cred, armOpts); err != nil {
		return provider.Info{}, fmt.Errorf("azure: %w", err)
	}
	if g.arm, err = arm.NewClient("berth-provider-azure", "v1.0.0", cred, armOpts); err != nil {
		return provider.Info{}, fmt.Errorf("azure: %w", err)
	}
	// The logger is taken here, not in New: a plugin binary calls New
	// before its Serve installs the logger that reaches berth's log.
	g.log = slog.Default().With("provider", "azure", "scale_set", cfg.Name, "resource_group", cfg.ResourceGroup)
	g.bg, g.stopBg = context.WithCancel(context.Background())

	set, err := g.getSet(ctx)
	if err != nil {
		return provider.Info{}, err
	}
	if err := g.checkSet(set, signer); err != nil {
		return provider.Info{}, err
	}
	return provider.Info{
		ID:      "azure/" + cfg.SubscriptionID + "/" + cfg.ResourceGroup + "/" + cfg.Name,
		MaxSize: g.maxSize,
		Version: Version,
		// Disposable: one scale set instance is as good as another.
		// RequestedSize: the scale set's capacity (requested.go).
		Capabilities: provider.Capabilities{Suspend: cfg.Suspend, Disposable: true, RequestedSize: true},
	}, nil
}

// Shutdown stops polling operations in flight; they go on in Azure, and
// instances keep running.
func (g *Group) Shutdown(ctx context.Context) error {
	if g.stopBg != nil {
		g.stopBg()
	}
	return nil
}

func (g *Group) getSet(ctx context.Context) (armcompute.VirtualMachineScaleSet, error) {
	resp, err := g.sets.Get(ctx, g.cfg.ResourceGroup, g.cfg.Name, nil)
	if err != nil {
		return armcompute.VirtualMachineScaleSet{}, g.mapErr("get scale set", err)
	}
	return resp.VirtualMachineScaleSet, nil
}

func capacity(set armcompute.VirtualMachineScaleSet) int {
	if set.SKU == nil || set.SKU.Capacity == nil {
		return 0
	}
	return int(*set.SKU.Capacity)
}

// checkSet refuses a set berth cannot drive, and learns the login and the
// size limit from it.
func (g *Group) checkSet(set armcompute.VirtualMachineScaleSet, signer ssh.Signer) error {
	p := set.Properties
	if p == nil || p.VirtualMachineProfile == nil {
		return fmt.Errorf("azure: scale set %s has no virtual machine profile: berth needs a Uniform scale set", g.cfg.Name)
	}
	if p.OrchestrationMode != nil && *p.OrchestrationMode != armcompute.OrchestrationModeUniform {
		return fmt.Errorf("%w: scale set %s uses %s orchestration; berth drives Uniform scale sets (instances made from the set's model, scaled by capacity): create the set with orchestration mode Uniform", ErrUnsupported, g.cfg.Name, *p.OrchestrationMode)
	}
	if p.Overprovision == nil || *p.Overprovision {
		// On unless the set was created with it off (armcompute
		// VirtualMachineScaleSetProperties.Overprovision).
		return fmt.Errorf("%w: scale set %s is overprovisioned (properties.overprovision is on, Azure's default): Azure creates more instances than the capacity berth asks for and deletes the extra ones once enough booted, so berth would see instances come and go that it never asked for, and could book a job on one about to be deleted; turn it off: az vmss update --resource-group %s --name %s --set overprovision=false, or overprovision = false in Terraform's azurerm_linux_virtual_machine_scale_set (examples/azure/ does)",
			ErrUnsupported, g.cfg.Name, g.cfg.ResourceGroup, g.cfg.Name)
	}
	vm := p.VirtualMachineProfile
	if err := g.checkLogin(vm.OSProfile, signer); err != nil {
		return err
	}
	limit := maxCapacity
	if p.SinglePlacementGroup == nil || *p.SinglePlacementGroup {
		limit = maxCapacitySinglePlacement
	}
	g.maxSize = limit
	if set.SKU != nil {
		g.vmSize = deref(set.SKU.Name, "")
	}
	if g.cfg.MaxSize > 0 {
		g.maxSize = min(g.cfg.MaxSize, limit)
	}
	spot := vm.Priority != nil && *vm.Priority == armcompute.VirtualMachinePriorityTypesSpot
	if spot && (vm.EvictionPolicy == nil || *vm.EvictionPolicy == armcompute.VirtualMachineEvictionPolicyTypesDeallocate) {
		return fmt.Errorf("%w: scale set %s runs Spot instances with eviction policy Deallocate: an evicted instance would stay in the set deallocated, holding capacity and billed for its disk, and look like one berth suspended; set the eviction policy to Delete, so evicted instances leave the set and berth replaces them", ErrUnsupported, g.cfg.Name)
	}
	if vm.DiagnosticsProfile == nil || vm.DiagnosticsProfile.BootDiagnostics == nil || vm.DiagnosticsProfile.BootDiagnostics.Enabled == nil || !*vm.DiagnosticsProfile.BootDiagnostics.Enabled {
		g.log.Warn("boot diagnostics are off: berth cannot read instances' host keys from their serial console and trusts the key it first sees; enable boot diagnostics (managed storage) on the scale set")
	}
	g.log.Info("scale set found", "capacity", capacity(set), "max_size", g.maxSize, "spot", spot, "user", g.username, "suspend", g.cfg.Suspend)
	if p.UpgradePolicy != nil && p.UpgradePolicy.Mode != nil && *p.UpgradePolicy.Mode != armcompute.UpgradeModeManual {
		g.log.Warn("the scale set's upgrade policy is not Manual: a model change reimages or restarts instances under running jobs", "mode", *p.UpgradePolicy.Mode)
	}
	return nil
}

// checkLogin takes the login from the OS profile: its admin user (unless
// connector.username names another), and checks that the private key's
// public half is one of its SSH keys, so a wrong key_path fails here and
// not at the first job.
func (g *Group) checkLogin(os *armcompute.VirtualMachineScaleSetOSProfile, signer ssh.Signer) error {
	g.username = g.cfg.Connector.Username
	if os == nil {
		return fmt.Errorf("azure: scale set %s has no OS profile; berth needs a Linux profile with an admin user and an SSH public key", g.cfg.Name)
	}
	if g.username == "" && os.AdminUsername != nil {
		g.username = *os.AdminUsername
	}
	if g.username == "" {
		return fmt.Errorf("azure: scale set %s names no admin user; set connector.username", g.cfg.Name)
	}
	if os.LinuxConfiguration == nil || os.LinuxConfiguration.SSH == nil || len(os.LinuxConfiguration.SSH.PublicKeys) == 0 {
		return fmt.Errorf("azure: scale set %s has no SSH public key in its OS profile (linuxConfiguration.ssh.publicKeys); add the public half of %s", g.cfg.Name, g.cfg.Connector.KeyPath)
	}
	want := signer.PublicKey().Marshal()
	var have []string
	for _, k := range os.LinuxConfiguration.SSH.PublicKeys {
		if k.KeyData == nil {
			continue
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(*k.KeyData))
		if err != nil {
			continue
		}
		if string(pub.Marshal()) == string(want) {
			return nil
		}
		have = append(have, ssh.FingerprintSHA256(pub))
	}
	return fmt.Errorf("azure: the key in connector.key_path %s (%s) is not one of the SSH public keys of scale set %s's OS profile (%s); give the private key of one of them", g.cfg.Connector.KeyPath, ssh.FingerprintSHA256(signer.PublicKey()), g.cfg.Name, strings.Join(have, ", "))
}
