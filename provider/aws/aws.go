package aws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2instanceconnect"
	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/internal/secretfile"
	"github.com/berth-ci/berth/provider"
)

// Version is the version string the group reports in Info.
const Version = "aws/1"

var (
	_ provider.InstanceGroup = (*Group)(nil)
	_ provider.Suspender     = (*Group)(nil)
)

// Group is an EC2 Auto Scaling group as a berth instance group. Create it
// with New and configure it with Init.
type Group struct {
	log *slog.Logger

	cfg        Config
	asg        *autoscaling.Client
	ec2        *ec2.Client
	eic        *ec2instanceconnect.Client
	privateKey []byte // PEM of the static key; nil with Instance Connect
	now        func() time.Time

	// scaleMu serialises the calls that change the group's desired
	// capacity (Increase, Decrease, EnterStandby, ExitStandby): Increase
	// reads it and writes it back, and berth makes provider calls
	// concurrently.
	scaleMu sync.Mutex

	mu         sync.Mutex
	seen       map[string]bool   // instances listed alive since start
	hostKeys   map[string]string // host keys learnt, by instance
	resuming   map[string]bool   // Resume calls in flight
	resumed    map[string]bool   // out of Standby, until the group lists them InService
	suspending map[string]bool   // Suspend calls in flight
	protWarned map[string]bool   // instances whose protection failure was logged
}

// New returns an uninitialised group; Init configures it from
// provider_config. It is the one constructor, for berth's plugin binary
// (main is sdk.Serve(aws.New())) and for tests alike.
func New() *Group {
	return &Group{log: slog.Default().With("provider", "aws"), now: time.Now,
		seen: map[string]bool{}, hostKeys: map[string]string{}, resuming: map[string]bool{}, resumed: map[string]bool{}, suspending: map[string]bool{}, protWarned: map[string]bool{}}
}

// Init reads provider_config (see Config), builds the AWS clients from the
// SDK's default configuration chain, and checks that the group exists and
// may be read.
func (g *Group) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	cfg, err := ParseConfig(s.Config)
	if err != nil {
		return provider.Info{}, err
	}
	g.cfg = cfg
	if cfg.Connector.KeyPath != "" {
		pem, err := os.ReadFile(cfg.Connector.KeyPath)
		if err != nil {
			return provider.Info{}, fmt.Errorf("aws: connector.key_path: %w; give the private key of the launch template's key pair", err)
		}
		if err := secretfile.Check(cfg.Connector.KeyPath, "aws: connector.key_path", "log in to every instance of the group"); err != nil {
			return provider.Info{}, err
		}
		if _, err := ssh.ParsePrivateKey(pem); err != nil {
			var missing *ssh.PassphraseMissingError
			if errors.As(err, &missing) {
				return provider.Info{}, fmt.Errorf("aws: connector.key_path %s is encrypted; berth needs it unencrypted (ssh-keygen -p -N '' -f KEY on a copy), or use use_instance_connect", cfg.Connector.KeyPath)
			}
			return provider.Info{}, fmt.Errorf("aws: connector.key_path %s: %w", cfg.Connector.KeyPath, err)
		}
		g.privateKey = pem
	}

	// The shared credentials file, when named by path (the SDK reads
	// AWS_SHARED_CREDENTIALS_FILE instead of ~/.aws/credentials).
	// A missing file is the SDK's to report, as it would be without it.
	if path := os.Getenv("AWS_SHARED_CREDENTIALS_FILE"); secretfile.Exists(path) {
		if err := secretfile.Check(path, "aws: AWS_SHARED_CREDENTIALS_FILE", "act as its IAM users"); err != nil {
			return provider.Info{}, fmt.Errorf("%w: %w", ErrCredentials, err)
		}
	}
	var opts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(cfg.Profile))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return provider.Info{}, fmt.Errorf("%w: loading the AWS configuration (profile %q): %w", ErrCredentials, cfg.Profile, err)
	}
	if awsCfg.Region == "" {
		return provider.Info{}, errors.New("aws: no region: set region in provider_config, or AWS_REGION, or a region in the profile")
	}
	// The SDK's standard retryer (3 attempts, exponential backoff with
	// jitter, retrying throttling and 5xx errors) is the default; the
	// endpoint override is the only thing changed.
	endpoint := func(base **string) {
		if cfg.Endpoint != "" {
			*base = aws.String(cfg.Endpoint)
		}
	}
	g.asg = autoscaling.NewFromConfig(awsCfg, func(o *autoscaling.Options) { endpoint(&o.BaseEndpoint) })
	g.ec2 = ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { endpoint(&o.BaseEndpoint) })
	g.eic = ec2instanceconnect.NewFromConfig(awsCfg, func(o *ec2instanceconnect.Options) { endpoint(&o.BaseEndpoint) })
	// The logger is taken here, not in New: a plugin binary calls New
	// before its Serve installs the logger that reaches berth's log.
	g.log = slog.Default().With("provider", "aws", "group", cfg.Name, "region", awsCfg.Region)

	grp, err := g.describeGroup(ctx)
	if err != nil {
		return provider.Info{}, err
	}
	g.log.Info("Auto Scaling group found", "min", aws.ToInt32(grp.MinSize), "max", aws.ToInt32(grp.MaxSize),
		"desired", aws.ToInt32(grp.DesiredCapacity), "instances", len(grp.Instances), "suspend", cfg.Suspend)
	if err := suspendPossible(cfg, grp); err != nil {
		return provider.Info{}, err
	}
	if aws.ToInt32(grp.MinSize) > 0 {
		g.log.Warn("the group's MinSize is above 0: berth cannot remove its last instances; set MinSize to 0", "min", aws.ToInt32(grp.MinSize))
	}
	return provider.Info{
		ID:      "aws/" + awsCfg.Region + "/" + cfg.Name,
		MaxSize: int(aws.ToInt32(grp.MaxSize)),
		Version: Version,
		// Disposable: one Auto Scaling instance is as good as another.
		// RequestedSize: the group's desired capacity (requested.go).
		Capabilities: provider.Capabilities{Suspend: cfg.Suspend, Disposable: true, RequestedSize: true},
	}, nil
}

// Shutdown releases nothing: the SDK clients hold no resources that
// outlive their HTTP connections, and instances keep running.
func (g *Group) Shutdown(ctx context.Context) error { return nil }

// describeGroup returns the group, paging through DescribeAutoScalingGroups.
func (g *Group) describeGroup(ctx context.Context) (asgtypes.AutoScalingGroup, error) {
	p := autoscaling.NewDescribeAutoScalingGroupsPaginator(g.asg, &autoscaling.DescribeAutoScalingGroupsInput{
		AutoScalingGroupNames: []string{g.cfg.Name},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return asgtypes.AutoScalingGroup{}, mapErr(err)
		}
		for _, grp := range page.AutoScalingGroups {
			if aws.ToString(grp.AutoScalingGroupName) == g.cfg.Name {
				return grp, nil
			}
		}
	}
	return asgtypes.AutoScalingGroup{}, fmt.Errorf("%w: no group named %q in this region; check name and region in provider_config", ErrGroupNotFound, g.cfg.Name)
}

// suspendPossible refuses suspend = true for a group that launches Spot
// instances: Auto Scaling's Spot requests are one-time, and EC2 cannot stop
// those, so every Suspend would fail after parking the instance.
func suspendPossible(cfg Config, grp asgtypes.AutoScalingGroup) error {
	if !cfg.Suspend || grp.MixedInstancesPolicy == nil || grp.MixedInstancesPolicy.InstancesDistribution == nil {
		return nil
	}
	if pct := aws.ToInt32(grp.MixedInstancesPolicy.InstancesDistribution.OnDemandPercentageAboveBaseCapacity); pct < 100 {
		return fmt.Errorf("%w: suspend = true, but group %s launches Spot instances (%d%% On-Demand above its base capacity), and EC2 cannot stop the one-time Spot instances Auto Scaling launches; set suspend = false, or make the group On-Demand only", ErrUnsupported, cfg.Name, pct)
	}
	return nil
}
