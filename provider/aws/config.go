package aws

import (
	"errors"
	"fmt"
	"time"

	"github.com/berth-ci/berth/internal/jsonconfig"
)

// Config is the provider's configuration, [autoscaler.provider_config] in
// berth's TOML, which reaches the provider as JSON. Decode it with
// ParseConfig; the zero values of optional fields mean the documented
// defaults.
type Config struct {
	// Name is the Auto Scaling group's name. Required.
	Name string `json:"name"`
	// Region is the group's AWS region; empty means the SDK's default
	// chain (AWS_REGION, the profile's region).
	Region string `json:"region"`
	// Profile is a named profile of the shared AWS config and credentials
	// files; empty means the SDK's default credential chain (environment,
	// shared files, SSO, web identity, the instance's IAM role).
	Profile string `json:"profile"`
	// Endpoint overrides the AWS endpoint for every service the provider
	// calls (Auto Scaling, EC2, EC2 Instance Connect), for VPC endpoints
	// behind a proxy or a local stack. Empty means AWS's own endpoints.
	Endpoint string `json:"endpoint"`
	// Connector says how executors log in to instances.
	Connector Connector `json:"connector"`
	// UsePrivateAddress connects to the instance's private IP address
	// (berth in the same VPC); false means its public address. Default
	// true.
	UsePrivateAddress bool `json:"use_private_address"`
	// SSHPort is the port sshd listens on in the image; default 22.
	SSHPort int `json:"ssh_port"`
	// InstanceReadyTimeout is how long an instance may take from launch
	// to InService and running before it is reported as timed out, so
	// berth replaces it. Default 10 minutes.
	InstanceReadyTimeout time.Duration `json:"instance_ready_timeout"`
	// Suspend enables suspend and resume by moving an instance to Standby
	// and stopping it (see the package doc for what that costs). The
	// group's instances must be EBS-backed and On-Demand (or persistent
	// Spot). Default false: the capability is not advertised.
	Suspend bool `json:"suspend"`
	// Hibernate stops suspended instances with hibernation, so memory
	// survives too; the launch template must enable hibernation.
	Hibernate bool `json:"hibernate"`
}

// Connector describes the SSH login to instances: a user and either a
// static key or EC2 Instance Connect.
type Connector struct {
	// Username is the OS user to log in as; default "ec2-user" (Amazon
	// Linux; "ubuntu" on Ubuntu, "admin" on Debian).
	Username string `json:"username"`
	// KeyPath is a file holding the unencrypted private key whose public
	// half the group's launch template installs (its key pair).
	KeyPath string `json:"key_path"`
	// UseInstanceConnect pushes a one-time key with EC2 Instance
	// Connect's SendSSHPublicKey for every connection instead of a static
	// key; the image must run ec2-instance-connect (Amazon Linux 2023 and
	// Ubuntu do). The key is valid for 60 seconds.
	UseInstanceConnect bool `json:"use_instance_connect"`
}

// Defaults applied by ParseConfig.
const (
	DefaultUsername             = "ec2-user"
	DefaultSSHPort              = 22
	DefaultInstanceReadyTimeout = 10 * time.Minute
)

// knownKeys is what a configuration error lists, so a typo is easy to fix.
const knownKeys = "name, region, profile, endpoint, connector {username, key_path, use_instance_connect}, use_private_address, ssh_port, instance_ready_timeout, suspend, hibernate"

type jsonConfig struct {
	Name                 string               `json:"name"`
	Region               string               `json:"region"`
	Profile              string               `json:"profile"`
	Endpoint             string               `json:"endpoint"`
	Connector            *Connector           `json:"connector"`
	UsePrivateAddress    *bool                `json:"use_private_address"`
	SSHPort              *int                 `json:"ssh_port"`
	InstanceReadyTimeout *jsonconfig.Duration `json:"instance_ready_timeout"`
	Suspend              bool                 `json:"suspend"`
	Hibernate            bool                 `json:"hibernate"`
}

// ParseConfig decodes and checks provider_config. Unknown keys are an
// error, so a typo does not silently fall back to a default.
func ParseConfig(b []byte) (Config, error) {
	var j jsonConfig
	if err := jsonconfig.Decode(b, &j, "aws", "set at least name (the Auto Scaling group) and connector", knownKeys); err != nil {
		return Config{}, err
	}
	c := Config{Name: j.Name, Region: j.Region, Profile: j.Profile, Endpoint: j.Endpoint,
		UsePrivateAddress: true, SSHPort: DefaultSSHPort, InstanceReadyTimeout: DefaultInstanceReadyTimeout,
		Suspend: j.Suspend, Hibernate: j.Hibernate}
	if j.Connector != nil {
		c.Connector = *j.Connector
	}
	if c.Connector.Username == "" {
		c.Connector.Username = DefaultUsername
	}
	if j.UsePrivateAddress != nil {
		c.UsePrivateAddress = *j.UsePrivateAddress
	}
	if j.SSHPort != nil {
		c.SSHPort = *j.SSHPort
	}
	if j.InstanceReadyTimeout != nil {
		c.InstanceReadyTimeout = time.Duration(*j.InstanceReadyTimeout)
	}
	return c, c.Validate()
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("aws: provider_config: name is empty; set it to the Auto Scaling group's name")
	case c.Connector.KeyPath == "" && !c.Connector.UseInstanceConnect:
		return errors.New("aws: provider_config: connector needs key_path (the private key of the launch template's key pair) or use_instance_connect = true")
	case c.Connector.KeyPath != "" && c.Connector.UseInstanceConnect:
		return errors.New("aws: provider_config: connector has both key_path and use_instance_connect; choose one")
	case c.SSHPort < 1 || c.SSHPort > 65535:
		return fmt.Errorf("aws: provider_config: ssh_port %d is not a TCP port", c.SSHPort)
	case c.InstanceReadyTimeout <= 0:
		return fmt.Errorf("aws: provider_config: instance_ready_timeout %v must be positive", c.InstanceReadyTimeout)
	case c.Hibernate && !c.Suspend:
		return errors.New("aws: provider_config: hibernate needs suspend = true")
	}
	return nil
}
