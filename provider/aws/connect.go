package aws

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2instanceconnect"
	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/provider"
)

// dialTimeout bounds the TCP and SSH handshakes the provider makes itself
// (Heartbeat, and learning a host key from its fingerprint).
const dialTimeout = 10 * time.Second

// describe returns one instance of the group as EC2 sees it. An ID that is
// not an instance ID, unknown to EC2, or of another group is
// ErrUnknownInstance: berth must not hand out access to machines it does
// not manage.
func (g *Group) describe(ctx context.Context, id string) (ec2types.Instance, error) {
	if !instanceID.MatchString(id) {
		return ec2types.Instance{}, fmt.Errorf("%w: %q is not an EC2 instance ID", ErrUnknownInstance, id)
	}
	out, err := g.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return ec2types.Instance{}, mapErr(err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if aws.ToString(in.InstanceId) != id {
				continue
			}
			for _, t := range in.Tags {
				if aws.ToString(t.Key) == groupTag && aws.ToString(t.Value) == g.cfg.Name {
					return in, nil
				}
			}
			return ec2types.Instance{}, fmt.Errorf("%w: %s is not an instance of group %s", ErrUnknownInstance, id, g.cfg.Name)
		}
	}
	return ec2types.Instance{}, fmt.Errorf("%w: EC2 does not list %s", ErrUnknownInstance, id)
}

// addr returns host:port of the instance's SSH server.
func (g *Group) addr(in ec2types.Instance) (string, error) {
	id := aws.ToString(in.InstanceId)
	ip := aws.ToString(in.PrivateIpAddress)
	if !g.cfg.UsePrivateAddress {
		ip = aws.ToString(in.PublicIpAddress)
		if ip == "" {
			return "", fmt.Errorf("aws: instance %s has no public IP address; launch the group in a subnet that assigns them, or set use_private_address = true when berth runs inside the VPC", id)
		}
	}
	if ip == "" {
		return "", fmt.Errorf("%w: instance %s has no private IP address yet", ErrInvalidState, id)
	}
	return net.JoinHostPort(ip, strconv.Itoa(g.cfg.SSHPort)), nil
}

func running(in ec2types.Instance) error {
	if in.State == nil || in.State.Name != ec2types.InstanceStateNameRunning {
		st := "unknown"
		if in.State != nil {
			st = string(in.State.Name)
		}
		err := fmt.Errorf("%w: instance %s is %s, not running", ErrInvalidState, aws.ToString(in.InstanceId), st)
		return goingErr(in, err)
	}
	return nil
}

// ConnectInfo returns the instance's address, the login and the host key.
//
// The host key comes from the instance's console output (GetConsoleOutput),
// where cloud-init prints the host keys and their fingerprints at the end
// of the first boot; the console is AWS's channel, so no one on the network
// can forge it. When the console holds only fingerprints, the provider
// connects once, takes the key the server presents, and uses it only if its
// fingerprint is one of them. When the console holds neither (no
// cloud-init, or output not captured yet, which can take minutes after
// boot on older instance types), HostKey is left empty and a warning is
// logged: berth then trusts the key it first sees (trust on first use).
//
// With use_instance_connect, every call makes a fresh ed25519 key and
// pushes its public half with SendSSHPublicKey; it is valid for 60
// seconds, long enough to open the connection a job runs over.
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
	ci := provider.ConnectInfo{ID: id, Addr: addr, Username: g.cfg.Connector.Username, OS: "linux", Arch: arch(in.Architecture)}
	if in.Platform == ec2types.PlatformValuesWindows {
		ci.OS = "windows"
	}
	if ci.HostKey, err = g.hostKey(ctx, id, addr); err != nil {
		return provider.ConnectInfo{}, err
	}
	if g.cfg.Connector.UseInstanceConnect {
		ci.PrivateKey, err = g.pushKey(ctx, in)
		if err != nil {
			return provider.ConnectInfo{}, err
		}
	} else {
		ci.PrivateKey = g.privateKey
	}
	return ci, nil
}

func arch(a ec2types.ArchitectureValues) string {
	switch a {
	case ec2types.ArchitectureValuesArm64, ec2types.ArchitectureValuesArm64Mac:
		return "arm64"
	case ec2types.ArchitectureValuesI386:
		return "386"
	}
	return "amd64"
}

// hostKey returns the instance's host key, from the cache or its console.
func (g *Group) hostKey(ctx context.Context, id, addr string) (string, error) {
	g.mu.Lock()
	k, ok := g.hostKeys[id]
	g.mu.Unlock()
	if ok {
		return k, nil
	}
	out, err := g.ec2.GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: aws.String(id)})
	if err != nil {
		err = mapErr(err)
		if errors.Is(err, ErrPermission) {
			return "", err
		}
		g.log.Warn("no console output; host key left empty, to be trusted on first use", "id", id, "err", err)
		return "", nil
	}
	text, err := base64.StdEncoding.DecodeString(aws.ToString(out.Output))
	if err != nil {
		return "", fmt.Errorf("aws: console output of %s is not base64: %w", id, err)
	}
	found := parseConsole(string(text))
	switch {
	case len(found.Keys) > 0:
		k = found.Keys[0]
	case len(found.Fingerprints) > 0:
		k, err = keyByFingerprint(ctx, addr, found.Fingerprints)
		if err != nil {
			return "", fmt.Errorf("aws: instance %s: %w", id, err)
		}
	default:
		g.log.Warn("console output has no SSH host keys yet (cloud-init prints them late in the first boot); host key left empty, to be trusted on first use", "id", id)
		return "", nil
	}
	g.log.Info("learnt host key from console output", "id", id, "fingerprint", fingerprint(k))
	g.mu.Lock()
	g.hostKeys[id] = k
	g.mu.Unlock()
	return k, nil
}

func fingerprint(authorizedKey string) string {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorizedKey))
	if err != nil {
		return "?"
	}
	return ssh.FingerprintSHA256(k)
}

// errGotKey ends a handshake once the server has shown its host key.
var errGotKey = errors.New("host key received")

// keyByFingerprint connects to addr, takes the host key the server
// presents, and returns it if its fingerprint is one of fps.
func keyByFingerprint(ctx context.Context, addr string, fps []string) (string, error) {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("connect to %s to read its host key: %w", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(dialTimeout))
	var got ssh.PublicKey
	_, _, _, err = ssh.NewClientConn(c, addr, &ssh.ClientConfig{
		User: "berth-hostkey-probe",
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			got = key
			return errGotKey
		},
	})
	if got == nil {
		return "", fmt.Errorf("read host key from %s: %w", addr, err)
	}
	fp := ssh.FingerprintSHA256(got)
	if !slices.Contains(fps, fp) {
		return "", fmt.Errorf("the SSH server at %s presents host key %s, which is not among the fingerprints in the console output (%s); refusing to trust it: someone may be intercepting the connection", addr, fp, strings.Join(fps, ", "))
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(got))), nil
}

// pushKey makes a one-time key and sends its public half to the instance
// with EC2 Instance Connect; it returns the private half, PEM encoded.
func (g *Group) pushKey(ctx context.Context, in ec2types.Instance) ([]byte, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "berth one-time key")
	if err != nil {
		return nil, err
	}
	input := &ec2instanceconnect.SendSSHPublicKeyInput{
		InstanceId:     in.InstanceId,
		InstanceOSUser: aws.String(g.cfg.Connector.Username),
		SSHPublicKey:   aws.String(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))),
	}
	if in.Placement != nil {
		input.AvailabilityZone = in.Placement.AvailabilityZone
	}
	if _, err := g.eic.SendSSHPublicKey(ctx, input); err != nil {
		return nil, mapErr(err)
	}
	return pem.EncodeToMemory(block), nil
}

// Heartbeat checks that EC2 reports the instance running and that its SSH
// port accepts connections.
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
		return fmt.Errorf("aws: instance %s runs but its SSH port does not answer: %w; check the security group allows berth's address on port %d", id, err, g.cfg.SSHPort)
	}
	return c.Close()
}
