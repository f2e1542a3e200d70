package gcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"golang.org/x/crypto/ssh"
	"google.golang.org/api/option"

	"github.com/berth-ci/berth/internal/secretfile"
	"github.com/berth-ci/berth/provider"
)

// Version is the version string the group reports in Info.
const Version = "gcp/1"

var (
	_ provider.InstanceGroup = (*Group)(nil)
	_ provider.Suspender     = (*Group)(nil)
)

// opPoll is how often an operation is polled until DONE. Group operations
// finish in seconds; the poll counts against the project's read quota.
const opPoll = 500 * time.Millisecond

// Group is a Compute Engine managed instance group as a berth instance
// group. Create it with New and configure it with Init.
type Group struct {
	log *slog.Logger

	cfg        Config
	mig        mig
	instances  *compute.InstancesClient
	templates  *compute.InstanceTemplatesClient
	rtemplates *compute.RegionInstanceTemplatesClient
	mtypes     *compute.MachineTypesClient
	privateKey []byte
	now        func() time.Time
	retryWait  time.Duration // the first wait after a rate refusal

	// scaleMu serialises the calls that change the group's target size:
	// Increase reads it and writes it back, and berth makes provider
	// calls concurrently.
	scaleMu sync.Mutex
	// creation backs Increase off after the group failed to create
	// instances (creation.go); scaleMu guards it.
	creation provider.CreationBackoff

	mu        sync.Mutex
	refs      map[string]ref       // instances by ID, from the last listing
	firstSeen map[string]time.Time // when each ID was first listed
	hostKeys  map[string]string    // host keys learnt, by ID
}

// ref locates an instance: its zone and name.
type ref struct{ zone, name string }

func (r ref) url(project string) string {
	return "projects/" + project + "/zones/" + r.zone + "/instances/" + r.name
}

// New returns an uninitialised group; Init configures it from
// provider_config.
func New() *Group {
	return &Group{log: slog.Default().With("provider", "gcp"), now: time.Now, retryWait: retryFirst,
		refs: map[string]ref{}, firstSeen: map[string]time.Time{}, hostKeys: map[string]string{}}
}

// clientOptions are the options every Compute client gets: the endpoint
// override and the credentials.
func clientOptions(cfg Config) ([]option.ClientOption, error) {
	var opts []option.ClientOption
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	if cfg.CredentialsFile != "" {
		if err := secretfile.Check(cfg.CredentialsFile, "gcp: credentials_file", "act as berth's service account"); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCredentials, err)
		}
		b, err := os.ReadFile(cfg.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("%w: credentials_file: %w", ErrCredentials, err)
		}
		var f struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &f); err != nil || f.Type != "service_account" {
			return nil, fmt.Errorf("%w: credentials_file %s is not a service account key (JSON with \"type\": \"service_account\"); create one with `gcloud iam service-accounts keys create`, or leave credentials_file empty for application default credentials", ErrCredentials, cfg.CredentialsFile)
		}
		opts = append(opts, option.WithAuthCredentialsJSON(option.ServiceAccount, b))
	}
	return opts, nil
}

// Init reads provider_config (see Config), builds the Compute clients,
// and checks that the group exists, may be read, and can suspend if
// suspend is on.
func (g *Group) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	cfg, err := ParseConfig(s.Config)
	if err != nil {
		return provider.Info{}, err
	}
	g.cfg = cfg
	pem, err := os.ReadFile(cfg.Connector.KeyPath)
	if err != nil {
		return provider.Info{}, fmt.Errorf("gcp: connector.key_path: %w; give the private key whose public half the instance template's ssh-keys metadata holds", err)
	}
	if err := secretfile.Check(cfg.Connector.KeyPath, "gcp: connector.key_path", "log in to every instance of the group"); err != nil {
		return provider.Info{}, err
	}
	if path := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"); cfg.CredentialsFile == "" && path != "" && secretfile.Exists(path) {
		if err := secretfile.Check(path, "gcp: GOOGLE_APPLICATION_CREDENTIALS", "act as its account"); err != nil {
			return provider.Info{}, fmt.Errorf("%w: %w", ErrCredentials, err)
		}
	}
	if _, err := ssh.ParsePrivateKey(pem); err != nil {
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return provider.Info{}, fmt.Errorf("gcp: connector.key_path %s is encrypted; berth needs it unencrypted (ssh-keygen -p -N '' -f KEY on a copy)", cfg.Connector.KeyPath)
		}
		return provider.Info{}, fmt.Errorf("gcp: connector.key_path %s: %w", cfg.Connector.KeyPath, err)
	}
	g.privateKey = pem
	location := cfg.Zone
	if cfg.Region != "" {
		location = cfg.Region
	}
	g.log = slog.Default().With("provider", "gcp", "group", cfg.Name, "project", cfg.Project, "location", location)
	if err := g.connect(ctx); err != nil {
		return provider.Info{}, err
	}
	m, err := g.getGroup(ctx)
	if err != nil {
		return provider.Info{}, err
	}
	g.log.Info("managed instance group found", "target_size", m.GetTargetSize(), "target_suspended_size", m.GetTargetSuspendedSize(),
		"template", m.GetInstanceTemplate(), "max_size", cfg.MaxSize, "suspend", cfg.Suspend)
	if cfg.MaxSize == 0 {
		g.log.Warn("max_size is 0: nothing but berth bounds the group; set max_size to berth's max_instances, so that an increase whose answer was lost (berth or the plugin killed mid-call) cannot take the group past it")
	}
	if cfg.Suspend {
		if err := g.suspendPossible(ctx, m.GetInstanceTemplate()); err != nil {
			return provider.Info{}, err
		}
	}
	return provider.Info{
		ID:      "gcp/" + cfg.Project + "/" + location + "/" + cfg.Name,
		MaxSize: cfg.MaxSize,
		Version: Version,
		// Disposable: one managed instance is as good as another.
		// RequestedSize: the group's target size (requested.go).
		Capabilities: provider.Capabilities{Suspend: cfg.Suspend, Disposable: true, RequestedSize: true},
	}, nil
}

// connect builds the REST clients.
func (g *Group) connect(ctx context.Context) error {
	opts, err := clientOptions(g.cfg)
	if err != nil {
		return err
	}
	wrap := func(err error) error {
		return fmt.Errorf("%w: %w; set credentials_file, GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login`", ErrCredentials, err)
	}
	if g.cfg.Region != "" {
		g.mig, err = newRegional(ctx, g.cfg, opts)
	} else {
		g.mig, err = newZonal(ctx, g.cfg, opts)
	}
	if err != nil {
		return wrap(err)
	}
	if g.instances, err = compute.NewInstancesRESTClient(ctx, opts...); err != nil {
		return wrap(err)
	}
	if g.templates, err = compute.NewInstanceTemplatesRESTClient(ctx, opts...); err != nil {
		return wrap(err)
	}
	if g.rtemplates, err = compute.NewRegionInstanceTemplatesRESTClient(ctx, opts...); err != nil {
		return wrap(err)
	}
	if g.mtypes, err = compute.NewMachineTypesRESTClient(ctx, opts...); err != nil {
		return wrap(err)
	}
	return nil
}

// Shutdown closes the clients; instances keep running.
func (g *Group) Shutdown(ctx context.Context) error {
	if g.mig == nil {
		return nil
	}
	return errors.Join(g.mig.close(), g.instances.Close(), g.templates.Close(), g.rtemplates.Close(), g.mtypes.Close())
}

// requestID returns a fresh UUID for a mutation's requestId: Compute
// Engine applies a request once however often it is retried with the same
// ID.
func requestID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// mutate sends a group mutation (retried on rate refusals with one
// requestId, so it applies once) and polls its operation until DONE.
func (g *Group) mutate(ctx context.Context, what string, call func(rid string) (*compute.Operation, error)) error {
	rid := requestID()
	var op *compute.Operation
	if err := g.retry(ctx, what, func() (err error) { op, err = call(rid); return err }); err != nil {
		return err
	}
	return g.wait(ctx, what, op)
}

// wait polls an operation until it is DONE and returns its error, if any.
// A quota shortage reported by the operation wraps provider.ErrTransient.
func (g *Group) wait(ctx context.Context, what string, op *compute.Operation) error {
	for !op.Done() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("gcp: %s: operation %s not done: %w", what, op.Name(), ctx.Err())
		case <-time.After(opPoll):
		}
		err := g.retry(ctx, "operations.get", func() error { return op.Poll(ctx) })
		if err != nil && !op.Done() {
			return err
		}
	}
	pe := op.Proto().GetError()
	if pe == nil || len(pe.GetErrors()) == 0 {
		return nil
	}
	var msgs []string
	quota := false
	for _, e := range pe.GetErrors() {
		msgs = append(msgs, e.GetCode()+": "+e.GetMessage())
		quota = quota || strings.Contains(e.GetCode(), "QUOTA") || strings.Contains(e.GetCode(), "RATE_LIMIT")
	}
	if quota {
		return fmt.Errorf("%w: %s: operation %s: %s; raise the quota or wait for capacity: %w", ErrThrottled, what, op.Name(), strings.Join(msgs, "; "), provider.ErrTransient)
	}
	return fmt.Errorf("%w: %s: operation %s: %s", ErrOperation, what, op.Name(), strings.Join(msgs, "; "))
}
