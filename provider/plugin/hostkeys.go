package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/provider"
)

// HostKeyStore records the SSH host keys berth learned by trust on first
// use, durably (store.Bolt implements it), keyed by group and instance.
type HostKeyStore interface {
	// HostKey returns the recorded key, or "" if there is none.
	HostKey(group, id string) (string, error)
	// PutHostKey records key for the instance.
	PutHostKey(group, id, key string) error
	// ForgetHostKey drops the record of a deleted instance.
	ForgetHostKey(group, id string) error
}

// errNoHostKey is returned for instances without a host key when no
// HostKeyStore is configured: berth never connects unchecked.
var errNoHostKey = errors.New("the plugin reported no SSH host key and berth has no store to record one (trust on first use needs state storage)")

// trustOnFirstUse completes ConnectInfo for a plugin that cannot report
// host keys (as fleeting's cannot): the first key the instance presents is
// recorded in the store, and from then on only that key is accepted, across
// restarts of berth and of the plugin. The executor enforces the key as it
// does for every provider, so a changed key is refused, never trusted anew.
func (g *Group) trustOnFirstUse(ctx context.Context, ci provider.ConnectInfo) (provider.ConnectInfo, error) {
	hk := g.opts.HostKeys
	if hk == nil {
		return provider.ConnectInfo{}, fmt.Errorf("instance %s: %w", ci.ID, errNoHostKey)
	}
	group := g.groupID()
	key, err := hk.HostKey(group, ci.ID)
	if err != nil {
		return provider.ConnectInfo{}, fmt.Errorf("read the recorded host key of %s: %w", ci.ID, err)
	}
	if key != "" {
		ci.HostKey = key
		return ci, nil
	}
	key, err = scanHostKey(ctx, ci.Addr)
	if err != nil {
		return provider.ConnectInfo{}, fmt.Errorf("instance %s has no host key from the plugin and its SSH server at %s could not be asked for one: %w", ci.ID, ci.Addr, err)
	}
	if err := hk.PutHostKey(group, ci.ID, key); err != nil {
		return provider.ConnectInfo{}, fmt.Errorf("record the host key of %s: %w", ci.ID, err)
	}
	g.log.Warn("trusting the instance's SSH host key on first use; recorded it", "id", ci.ID, "addr", ci.Addr,
		"fingerprint", fingerprint(key))
	ci.HostKey = key
	return ci, nil
}

// errGotKey ends the handshake of scanHostKey once the key is known.
var errGotKey = errors.New("host key received")

// scanHostKey opens an SSH handshake only to learn the server's host key.
func scanHostKey(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var key string
	_, _, _, err = ssh.NewClientConn(c, addr, &ssh.ClientConfig{
		User: "berth-host-key-scan",
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			key = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
			return errGotKey
		},
	})
	if key != "" {
		return key, nil
	}
	if err == nil {
		err = errors.New("server sent no host key")
	}
	return "", err
}

func fingerprint(authorizedKey string) string {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorizedKey))
	if err != nil {
		return "?"
	}
	return ssh.FingerprintSHA256(k)
}
