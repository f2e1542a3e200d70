package gcp

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/berth-ci/berth/internal/jsonconfig"
)

// Config is the provider's configuration, [autoscaler.provider_config] in
// berth's TOML, which reaches the provider as JSON. Decode it with
// ParseConfig; the zero values of optional fields mean the documented
// defaults.
type Config struct {
	// Name is the managed instance group's name. Required.
	Name string `json:"name"`
	// Project is the group's project ID. Required.
	Project string `json:"project"`
	// Zone is a zonal group's zone; Region a regional group's region.
	// Exactly one is required.
	Zone   string `json:"zone"`
	Region string `json:"region"`
	// CredentialsFile is a service account key file (JSON). Empty means
	// application default credentials: GOOGLE_APPLICATION_CREDENTIALS,
	// gcloud's application-default login, or the metadata server of the
	// VM or GKE workload berth runs on.
	CredentialsFile string `json:"credentials_file"`
	// Endpoint overrides the Compute API endpoint (a Private Service
	// Connect endpoint, or a fake). Empty means Google's.
	Endpoint string `json:"endpoint"`
	// MaxSize is the most instances berth lets the group hold, suspended
	// ones included; 0 means no limit beyond berth's max_instances.
	MaxSize int `json:"max_size"`
	// Connector says how executors log in to instances.
	Connector Connector `json:"connector"`
	// UsePrivateAddress connects to the instance's internal IP (berth in
	// the same VPC); false means its external NAT address. Default true.
	UsePrivateAddress bool `json:"use_private_address"`
	// SSHPort is the port sshd listens on in the image; default 22.
	SSHPort int `json:"ssh_port"`
	// InstanceReadyTimeout is how long an instance may take from when
	// berth first lists it to RUNNING before it is reported as timed out
	// (the group's listing carries no creation time). Default 10 minutes.
	InstanceReadyTimeout time.Duration `json:"instance_ready_timeout"`
	// Suspend enables suspend and resume through the group's
	// suspendInstances and resumeInstances (memory and disk kept). Init
	// refuses it for machine types that cannot suspend.
	Suspend bool `json:"suspend"`
	// CreationCheck is how long Increase watches the new members after
	// the resize for a creation that failed (quota, stockout: the resize
	// itself ends DONE), so that it returns the error and gives the
	// target back at once. Default 30 s; keep it below the plugin call
	// timeout (1 minute).
	CreationCheck time.Duration `json:"creation_check"`
}

// Connector describes the SSH login to instances.
type Connector struct {
	// Username is the OS user the key logs in as: the USER of the
	// template's ssh-keys metadata entry "USER:KEY". Default "berth".
	Username string `json:"username"`
	// KeyPath is a file holding the unencrypted private key whose public
	// half the instance template's ssh-keys metadata holds. Required.
	KeyPath string `json:"key_path"`
}

// Defaults applied by ParseConfig.
const (
	DefaultUsername             = "berth"
	DefaultSSHPort              = 22
	DefaultInstanceReadyTimeout = 10 * time.Minute
)

const knownKeys = "name, project, zone, region, credentials_file, endpoint, max_size, connector {username, key_path}, use_private_address, ssh_port, instance_ready_timeout, suspend, creation_check"

type jsonConfig struct {
	Name                 string               `json:"name"`
	Project              string               `json:"project"`
	Zone                 string               `json:"zone"`
	Region               string               `json:"region"`
	CredentialsFile      string               `json:"credentials_file"`
	Endpoint             string               `json:"endpoint"`
	MaxSize              int                  `json:"max_size"`
	Connector            *Connector           `json:"connector"`
	UsePrivateAddress    *bool                `json:"use_private_address"`
	SSHPort              *int                 `json:"ssh_port"`
	InstanceReadyTimeout *jsonconfig.Duration `json:"instance_ready_timeout"`
	Suspend              bool                 `json:"suspend"`
	CreationCheck        *jsonconfig.Duration `json:"creation_check"`
}

// ParseConfig decodes and checks provider_config. Unknown keys are an
// error, so a typo does not silently fall back to a default.
func ParseConfig(b []byte) (Config, error) {
	var j jsonConfig
	if err := jsonconfig.Decode(b, &j, "gcp", "set at least name, project, zone (or region) and connector", knownKeys); err != nil {
		return Config{}, err
	}
	c := Config{Name: j.Name, Project: j.Project, Zone: j.Zone, Region: j.Region, CredentialsFile: j.CredentialsFile,
		Endpoint: j.Endpoint, MaxSize: j.MaxSize, UsePrivateAddress: true, SSHPort: DefaultSSHPort,
		InstanceReadyTimeout: DefaultInstanceReadyTimeout, Suspend: j.Suspend, CreationCheck: DefaultCreationCheck}
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
	if j.CreationCheck != nil {
		c.CreationCheck = time.Duration(*j.CreationCheck)
	}
	return c, c.Validate()
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("gcp: provider_config: name is empty; set it to the managed instance group's name")
	case c.Project == "":
		return errors.New("gcp: provider_config: project is empty; set it to the group's project ID")
	case c.Zone == "" && c.Region == "":
		return errors.New("gcp: provider_config: set zone (a zonal group) or region (a regional group)")
	case c.Zone != "" && c.Region != "":
		return fmt.Errorf("gcp: provider_config: both zone %q and region %q are set; a group is zonal or regional, set one", c.Zone, c.Region)
	case c.Connector.KeyPath == "":
		return errors.New("gcp: provider_config: connector.key_path is empty; give the private key whose public half the instance template's ssh-keys metadata holds")
	case c.MaxSize < 0:
		return fmt.Errorf("gcp: provider_config: max_size %d is negative", c.MaxSize)
	case c.SSHPort < 1 || c.SSHPort > 65535:
		return fmt.Errorf("gcp: provider_config: ssh_port %d is not a TCP port", c.SSHPort)
	case c.InstanceReadyTimeout <= 0:
		return fmt.Errorf("gcp: provider_config: instance_ready_timeout %v must be positive", c.InstanceReadyTimeout)
	case c.CreationCheck < 0 || c.CreationCheck > 45*time.Second:
		return fmt.Errorf("gcp: provider_config: creation_check %v must be between 0 and 45s (Increase waits that long within the plugin's 1 minute call timeout)", c.CreationCheck)
	}
	if c.CredentialsFile != "" {
		if _, err := os.Stat(c.CredentialsFile); err != nil {
			return fmt.Errorf("gcp: provider_config: credentials_file: %w; give a service account key file, or leave it empty for application default credentials", err)
		}
	}
	return nil
}
