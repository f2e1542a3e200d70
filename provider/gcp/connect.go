package gcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"golang.org/x/crypto/ssh"
	"google.golang.org/protobuf/proto"

	"github.com/berth-ci/berth/provider"
)

// dialTimeout bounds the TCP connection Heartbeat makes.
const dialTimeout = 10 * time.Second

// describe returns one instance of the group. An ID that is not an
// instance ID, not listed by the group, or of an instance another group
// created is ErrUnknownInstance: berth must not hand out access to
// machines it does not manage.
func (g *Group) describe(ctx context.Context, id string) (*computepb.Instance, error) {
	found, _, errs := g.resolve(ctx, []string{id}, false)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r, ok := found[id]
	if !ok {
		return nil, fmt.Errorf("%w: group %s does not hold instance %s", ErrUnknownInstance, g.cfg.Name, id)
	}
	var in *computepb.Instance
	err := g.retry(ctx, "instances.get", func() (err error) {
		in, err = g.instances.Get(ctx, &computepb.GetInstanceRequest{Project: g.cfg.Project, Zone: r.zone, Instance: r.name})
		return err
	})
	if err != nil {
		return nil, err
	}
	if strconv.FormatUint(in.GetId(), 10) != id {
		return nil, fmt.Errorf("%w: instance %s was recreated (it is now %d)", ErrUnknownInstance, id, in.GetId())
	}
	if !strings.HasSuffix(metadata(in, "created-by"), "/instanceGroupManagers/"+g.cfg.Name) {
		return nil, fmt.Errorf("%w: %s (%s) was not created by group %s", ErrUnknownInstance, id, r.name, g.cfg.Name)
	}
	return in, nil
}

func metadata(in *computepb.Instance, key string) string {
	for _, it := range in.GetMetadata().GetItems() {
		if it.GetKey() == key {
			return it.GetValue()
		}
	}
	return ""
}

// addr returns host:port of the instance's SSH server.
func (g *Group) addr(in *computepb.Instance) (string, error) {
	var nic *computepb.NetworkInterface
	if nics := in.GetNetworkInterfaces(); len(nics) > 0 {
		nic = nics[0]
	}
	ip := nic.GetNetworkIP()
	if !g.cfg.UsePrivateAddress {
		ip = ""
		for _, ac := range nic.GetAccessConfigs() {
			if ac.GetNatIP() != "" {
				ip = ac.GetNatIP()
				break
			}
		}
		if ip == "" {
			return "", fmt.Errorf("gcp: instance %s has no external IP address; give the template an access config, or set use_private_address = true when berth runs inside the VPC", in.GetName())
		}
	}
	if ip == "" {
		return "", fmt.Errorf("%w: instance %s has no internal IP address yet", ErrInvalidState, in.GetName())
	}
	return net.JoinHostPort(ip, strconv.Itoa(g.cfg.SSHPort)), nil
}

func running(in *computepb.Instance) error {
	if in.GetStatus() != "RUNNING" {
		return goingErr(in, fmt.Errorf("%w: instance %s is %s, not RUNNING", ErrInvalidState, in.GetName(), in.GetStatus()))
	}
	return nil
}

// ConnectInfo returns the instance's address, the login and the host key.
//
// The host key comes from the instance's guest attributes (namespace
// hostkeys/), where Google's guest agent publishes the SSH host keys at
// boot when the template sets metadata enable-guest-attributes = TRUE;
// they travel through Google's API, so no one on the network can forge
// them. Without guest attributes HostKey is left empty and a warning is
// logged: berth then trusts the key it first sees.
func (g *Group) ConnectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	in, err := g.describe(ctx, id)
	if err != nil {
		return provider.ConnectInfo{}, err
	}
	if err := running(in); err != nil {
		return provider.ConnectInfo{}, err
	}
	addr, err := g.addr(in)
	if err != nil {
		return provider.ConnectInfo{}, err
	}
	ci := provider.ConnectInfo{ID: id, Addr: addr, Username: g.cfg.Connector.Username, OS: "linux", Arch: "amd64", PrivateKey: g.privateKey}
	if strings.HasPrefix(path.Base(in.GetMachineType()), "t2a-") || strings.HasPrefix(path.Base(in.GetMachineType()), "c4a-") {
		ci.Arch = "arm64"
	}
	if ci.HostKey, err = g.hostKey(ctx, id, in); err != nil {
		return provider.ConnectInfo{}, err
	}
	return ci, nil
}

// hostKeyRank orders host key types best first.
var hostKeyRank = map[string]int{ssh.KeyAlgoED25519: 0, ssh.KeyAlgoECDSA256: 1, ssh.KeyAlgoECDSA384: 1, ssh.KeyAlgoECDSA521: 1, ssh.KeyAlgoRSA: 2}

// hostKey returns the instance's host key, from the cache or its guest
// attributes.
func (g *Group) hostKey(ctx context.Context, id string, in *computepb.Instance) (string, error) {
	g.mu.Lock()
	k, ok := g.hostKeys[id]
	g.mu.Unlock()
	if ok {
		return k, nil
	}
	zone := path.Base(in.GetZone())
	var ga *computepb.GuestAttributes
	err := g.retry(ctx, "instances.getGuestAttributes", func() (err error) {
		ga, err = g.instances.GetGuestAttributes(ctx, &computepb.GetGuestAttributesInstanceRequest{Project: g.cfg.Project, Zone: zone, Instance: in.GetName(), QueryPath: proto.String("hostkeys/")})
		return err
	})
	if errors.Is(err, ErrPermission) {
		return "", err
	}
	if err != nil {
		g.log.Warn("no guest attributes (set metadata enable-guest-attributes = TRUE in the template); host key left empty, to be trusted on first use", "id", id, "err", err)
		return "", nil
	}
	best, rank := "", 99
	for _, it := range ga.GetQueryValue().GetItems() {
		blob, err := base64.StdEncoding.DecodeString(it.GetValue())
		if err != nil {
			continue
		}
		pub, err := ssh.ParsePublicKey(blob)
		if err != nil || pub.Type() != it.GetKey() {
			continue
		}
		if r, ok := hostKeyRank[pub.Type()]; ok && r < rank {
			best, rank = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), r
		}
	}
	if best == "" {
		g.log.Warn("guest attributes hold no SSH host keys yet (the guest agent writes them at boot); host key left empty, to be trusted on first use", "id", id)
		return "", nil
	}
	g.log.Info("learnt host key from guest attributes", "id", id, "fingerprint", fingerprint(best))
	g.mu.Lock()
	g.hostKeys[id] = best
	g.mu.Unlock()
	return best, nil
}

func fingerprint(authorizedKey string) string {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorizedKey))
	if err != nil {
		return "?"
	}
	return ssh.FingerprintSHA256(k)
}

// Heartbeat checks that the instance runs and that its SSH port accepts
// connections.
func (g *Group) Heartbeat(ctx context.Context, id string) error {
	in, err := g.describe(ctx, id)
	if err != nil {
		return err
	}
	if err := running(in); err != nil {
		return err
	}
	addr, err := g.addr(in)
	if err != nil {
		return err
	}
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("gcp: instance %s runs but its SSH port does not answer: %w; check that a firewall rule allows berth's address on port %d", id, err, g.cfg.SSHPort)
	}
	return c.Close()
}
