package azure

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/berth-ci/berth/internal/jsonconfig"
)

// Config is the provider's configuration, [autoscaler.provider_config] in
// berth's TOML, which reaches the provider as JSON. Decode it with
// ParseConfig; the zero values of optional fields mean the documented
// defaults.
type Config struct {
	// SubscriptionID is the Azure subscription holding the scale set;
	// empty means the AZURE_SUBSCRIPTION_ID environment variable.
	SubscriptionID string `json:"subscription_id"`
	// ResourceGroup is the scale set's resource group. Required.
	ResourceGroup string `json:"resource_group"`
	// Name is the virtual machine scale set's name. Required.
	Name string `json:"name"`
	// Cloud is the Azure cloud: "public" (default), "usgovernment" or
	// "china".
	Cloud string `json:"cloud"`
	// Endpoint overrides the cloud's Resource Manager endpoint (Azure
	// Stack Hub, a proxy, a local fake). Empty means the cloud's own.
	Endpoint string `json:"endpoint"`
	// AuthorityHost overrides the cloud's Microsoft Entra authority, for
	// private clouds; instance discovery (which asks
	// login.microsoftonline.com about the authority) is then off. The
	// AZURE_AUTHORITY_HOST environment variable, which the credential
	// chain reads itself, wins over it.
	AuthorityHost string `json:"authority_host"`
	// CAFile is a PEM file of certificate authorities to trust besides
	// the system's, for the endpoint and the authority (a private
	// cloud's, or a TLS-inspecting proxy's).
	CAFile string `json:"ca_file"`
	// Connector says how executors log in to instances.
	Connector Connector `json:"connector"`
	// UsePrivateAddress connects to the instance's private IP address
	// (berth in the same virtual network); false means its instance-level
	// public address. Default true.
	UsePrivateAddress bool `json:"use_private_address"`
	// SSHPort is the port sshd listens on in the image; default 22.
	SSHPort int `json:"ssh_port"`
	// InstanceReadyTimeout is how long an instance may take from launch
	// to running before it is reported as timed out, so berth replaces
	// it; it bounds a resume too. Default 10 minutes.
	InstanceReadyTimeout time.Duration `json:"instance_ready_timeout"`
	// Suspend enables suspend and resume by deallocating an instance and
	// starting it again; its managed OS disk is kept. Default false: the
	// capability is not advertised.
	Suspend bool `json:"suspend"`
	// MaxSize is the most instances berth lets the set hold (its
	// capacity, deallocated instances included); 0 means the platform's
	// limit (1,000, or 100 with a single placement group).
	MaxSize int `json:"max_size"`
	// CreationCheck is how long Increase watches the capacity operation
	// for an allocation failure before it returns (creation.go); a
	// failure after that is found by a later listing. Default 30 s, at
	// most 45 s (within the plugin's 1 minute call timeout).
	CreationCheck time.Duration `json:"creation_check"`
}

// Connector describes the SSH login to instances.
type Connector struct {
	// Username is the OS user to log in as; default the scale set OS
	// profile's admin user.
	Username string `json:"username"`
	// KeyPath is a file holding the unencrypted private key whose public
	// half is in the scale set OS profile's SSH public keys. Required.
	KeyPath string `json:"key_path"`
}

// Defaults applied by ParseConfig.
const (
	DefaultSSHPort              = 22
	DefaultInstanceReadyTimeout = 10 * time.Minute
)

// knownKeys is what a configuration error lists, so a typo is easy to fix.
const knownKeys = "subscription_id, resource_group, name, cloud, endpoint, authority_host, ca_file, connector {username, key_path}, use_private_address, ssh_port, instance_ready_timeout, suspend, max_size, creation_check"

type jsonConfig struct {
	SubscriptionID       string               `json:"subscription_id"`
	ResourceGroup        string               `json:"resource_group"`
	Name                 string               `json:"name"`
	Cloud                string               `json:"cloud"`
	Endpoint             string               `json:"endpoint"`
	AuthorityHost        string               `json:"authority_host"`
	CAFile               string               `json:"ca_file"`
	Connector            *Connector           `json:"connector"`
	UsePrivateAddress    *bool                `json:"use_private_address"`
	SSHPort              *int                 `json:"ssh_port"`
	InstanceReadyTimeout *jsonconfig.Duration `json:"instance_ready_timeout"`
	Suspend              bool                 `json:"suspend"`
	MaxSize              int                  `json:"max_size"`
	CreationCheck        *jsonconfig.Duration `json:"creation_check"`
}

// ParseConfig decodes and checks provider_config. Unknown keys are an
// error, so a typo does not silently fall back to a default.
func ParseConfig(b []byte) (Config, error) {
	var j jsonConfig
	if err := jsonconfig.Decode(b, &j, "azure", "set at least resource_group, name (the scale set) and connector.key_path", knownKeys); err != nil {
		return Config{}, err
	}
	c := Config{SubscriptionID: j.SubscriptionID, ResourceGroup: j.ResourceGroup, Name: j.Name, Cloud: strings.ToLower(j.Cloud),
		Endpoint: j.Endpoint, AuthorityHost: j.AuthorityHost, CAFile: j.CAFile, UsePrivateAddress: true, SSHPort: DefaultSSHPort,
		InstanceReadyTimeout: DefaultInstanceReadyTimeout, Suspend: j.Suspend, MaxSize: j.MaxSize, CreationCheck: DefaultCreationCheck}
	if c.SubscriptionID == "" {
		c.SubscriptionID = os.Getenv("AZURE_SUBSCRIPTION_ID")
	}
	if c.Cloud == "" {
		c.Cloud = "public"
	}
	if j.Connector != nil {
		c.Connector = *j.Connector
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
	case c.SubscriptionID == "":
		return errors.New("azure: provider_config: no subscription: set subscription_id, or AZURE_SUBSCRIPTION_ID in berth's environment")
	case c.ResourceGroup == "":
		return errors.New("azure: provider_config: resource_group is empty; set it to the scale set's resource group")
	case c.Name == "":
		return errors.New("azure: provider_config: name is empty; set it to the virtual machine scale set's name")
	case c.Cloud != "public" && c.Cloud != "usgovernment" && c.Cloud != "china":
		return fmt.Errorf("azure: provider_config: cloud %q: want public, usgovernment or china (or endpoint and authority_host for another)", c.Cloud)
	case c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "https://"):
		return fmt.Errorf("azure: provider_config: endpoint %q must be an https:// URL: Azure SDK clients send bearer tokens only over TLS", c.Endpoint)
	case c.AuthorityHost != "" && !strings.HasPrefix(c.AuthorityHost, "https://"):
		return fmt.Errorf("azure: provider_config: authority_host %q must be an https:// URL", c.AuthorityHost)
	case c.Connector.KeyPath == "":
		return errors.New("azure: provider_config: connector.key_path is empty; give the private key whose public half is in the scale set's OS profile")
	case c.SSHPort < 1 || c.SSHPort > 65535:
		return fmt.Errorf("azure: provider_config: ssh_port %d is not a TCP port", c.SSHPort)
	case c.InstanceReadyTimeout <= 0:
		return fmt.Errorf("azure: provider_config: instance_ready_timeout %v must be positive", c.InstanceReadyTimeout)
	case c.CreationCheck < 0 || c.CreationCheck > 45*time.Second:
		return fmt.Errorf("azure: provider_config: creation_check %v must be between 0 and 45s (Increase waits that long within the plugin's 1 minute call timeout)", c.CreationCheck)
	case c.MaxSize < 0:
		return fmt.Errorf("azure: provider_config: max_size %d must not be negative", c.MaxSize)
	}
	return nil
}
