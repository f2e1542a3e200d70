package awsfake

import (
	"github.com/berth-ci/berth/internal/fakehost"
	"golang.org/x/crypto/ssh"
)

// startSSH makes in a real SSH host on this machine, at its private and
// public addresses, taking the keys the fake cloud authorizes for it.
func startSSH(c *Cloud, in *Instance) (*fakehost.Server, error) {
	return fakehost.Start(fakehost.Host{
		Addrs: []string{in.PrivateIP, in.PublicIP}, Port: c.port, HostKey: in.signer,
		Home: in.home, User: "ec2-user",
		Authorized: func(user string, key ssh.PublicKey) bool { return c.authorized(in.ID, user, key) },
	})
}
