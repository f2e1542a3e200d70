package azure

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"github.com/berth-ci/berth/provider"
)

// dialTimeout bounds the TCP handshake of Heartbeat.
const dialTimeout = 10 * time.Second

// networkAPIVersion is the Microsoft.Network version of the scale set
// address listings. They are two GETs, so the provider makes them through
// azcore's ARM pipeline (same credential, retries and transport) rather
// than pull in the whole armnetwork module for them.
const networkAPIVersion = "2018-10-01"

// vm returns one instance of the set with its instance view. An ID that is
// not an instance of the set is ErrUnknownInstance: berth must not hand
// out access to machines it does not manage.
func (g *Group) vm(ctx context.Context, id string) (string, vmState, error) {
	num, err := g.instanceID(id)
	if err != nil {
		return "", vmState{}, err
	}
	resp, err := g.vms.Get(ctx, g.cfg.ResourceGroup, g.cfg.Name, num, &armcompute.VirtualMachineScaleSetVMsClientGetOptions{Expand: to.Ptr(armcompute.InstanceViewTypesInstanceView)})
	if err != nil {
		return "", vmState{}, g.mapErr("get instance "+id, err)
	}
	s := stateOf(&resp.VirtualMachineScaleSetVM)
	if s.power != "running" || s.provisioning == "deleting" {
		return "", vmState{}, goingErr(s, fmt.Errorf("%w: instance %s is %s (provisioning %s), not running", ErrInvalidState, id, s.power, s.provisioning))
	}
	return num, s, nil
}

func (g *Group) setPath() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s",
		url.PathEscape(g.cfg.SubscriptionID), url.PathEscape(g.cfg.ResourceGroup), url.PathEscape(g.cfg.Name))
}

// getJSON GETs an ARM path (or a nextLink URL) through the ARM pipeline.
func (g *Group) getJSON(ctx context.Context, target string, out any) error {
	if !strings.HasPrefix(target, "https://") {
		target = runtime.JoinPaths(g.arm.Endpoint(), target) + "?api-version=" + networkAPIVersion
	}
	req, err := runtime.NewRequest(ctx, http.MethodGet, target)
	if err != nil {
		return err
	}
	req.Raw().Header.Set("Accept", "application/json")
	resp, err := g.arm.Pipeline().Do(req)
	if err != nil {
		return err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return runtime.NewResponseError(resp)
	}
	return runtime.UnmarshalAsJSON(resp, out)
}

type ipConfiguration struct {
	ID         string `json:"id"`
	Properties struct {
		Primary          bool   `json:"primary"`
		PrivateIPAddress string `json:"privateIPAddress"`
	} `json:"properties"`
}

// privateIP returns the primary private address of the instance's primary
// network interface.
func (g *Group) privateIP(ctx context.Context, id, num string) (string, error) {
	var nics struct {
		Value []struct {
			Properties struct {
				Primary          bool              `json:"primary"`
				IPConfigurations []ipConfiguration `json:"ipConfigurations"`
			} `json:"properties"`
		} `json:"value"`
	}
	if err := g.getJSON(ctx, g.setPath()+"/virtualMachines/"+num+"/networkInterfaces", &nics); err != nil {
		return "", g.mapErr("list network interfaces of "+id, err)
	}
	best := ""
	for _, nic := range nics.Value {
		for _, ipc := range nic.Properties.IPConfigurations {
			ip := ipc.Properties.PrivateIPAddress
			if ip != "" && (best == "" || nic.Properties.Primary && ipc.Properties.Primary) {
				best = ip
			}
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: instance %s has no private IP address yet", ErrInvalidState, id)
	}
	return best, nil
}

// publicIP returns the instance-level public address of the instance,
// from the set's public address listing (each names its IP
// configuration, under the instance's path).
func (g *Group) publicIP(ctx context.Context, id, num string) (string, error) {
	marker := strings.ToLower("/virtualMachines/" + num + "/networkInterfaces/")
	next := g.setPath() + "/publicipaddresses"
	for next != "" {
		var page struct {
			Value []struct {
				Properties struct {
					IPAddress       string `json:"ipAddress"`
					IPConfiguration struct {
						ID string `json:"id"`
					} `json:"ipConfiguration"`
				} `json:"properties"`
			} `json:"value"`
			NextLink string `json:"nextLink"`
		}
		if err := g.getJSON(ctx, next, &page); err != nil {
			return "", g.mapErr("list public IP addresses", err)
		}
		for _, ip := range page.Value {
			if strings.Contains(strings.ToLower(ip.Properties.IPConfiguration.ID), marker) && ip.Properties.IPAddress != "" {
				return ip.Properties.IPAddress, nil
			}
		}
		next = page.NextLink
	}
	return "", fmt.Errorf("azure: instance %s has no public IP address; give the scale set's IP configuration a public IP address configuration, or set use_private_address = true when berth runs in the virtual network", id)
}

// addr returns host:port of the instance's SSH server.
func (g *Group) addr(ctx context.Context, id, num string) (string, error) {
	var ip string
	var err error
	if g.cfg.UsePrivateAddress {
		ip, err = g.privateIP(ctx, id, num)
	} else {
		ip, err = g.publicIP(ctx, id, num)
	}
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip, strconv.Itoa(g.cfg.SSHPort)), nil
}

// arch guesses the architecture from the VM size: Azure's Arm64 sizes
// carry a "p" among the letters after the vCPU count (D2ps_v5, E4pds_v6).
func arch(size string) string {
	name := strings.TrimPrefix(strings.ToLower(size), "standard_")
	name, _, _ = strings.Cut(name, "_")
	if i := strings.IndexAny(name, "0123456789"); i >= 0 {
		feats := strings.TrimLeft(name[i:], "0123456789-")
		if strings.Contains(feats, "p") {
			return "arm64"
		}
	}
	return "amd64"
}

// ConnectInfo returns the instance's address, the login from the scale
// set's OS profile and the host key from its serial console (see
// hostKey).
func (g *Group) ConnectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	num, _, err := g.vm(ctx, id)
	if err != nil {
		return provider.ConnectInfo{}, err
	}
	addr, err := g.addr(ctx, id, num)
	if err != nil {
		return provider.ConnectInfo{}, err
	}
	ci := provider.ConnectInfo{ID: id, Addr: addr, Username: g.username, PrivateKey: g.privateKey, OS: "linux", Arch: arch(g.vmSize)}
	if ci.HostKey, err = g.hostKey(ctx, id, num, addr); err != nil {
		return provider.ConnectInfo{}, err
	}
	return ci, nil
}

// Heartbeat checks that Azure reports the instance running and that its
// SSH port accepts connections.
func (g *Group) Heartbeat(ctx context.Context, id string) error {
	num, _, err := g.vm(ctx, id)
	if err != nil {
		return err
	}
	addr, err := g.addr(ctx, id, num)
	if err != nil {
		return err
	}
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("azure: instance %s runs but its SSH port does not answer: %w; check the network security group allows berth's address on port %d", id, err, g.cfg.SSHPort)
	}
	return c.Close()
}
