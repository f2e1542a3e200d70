package images

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// errPrivate marks a connection refused because the registry's address is
// on the host's own or a private network and the registry is not listed.
var errPrivate = errors.New("the registry's address is loopback, link-local or private")

// sharedAddrSpace is 100.64.0.0/10 (carrier-grade NAT), where some clouds
// serve instance metadata.
var sharedAddrSpace = netip.MustParsePrefix("100.64.0.0/10")

// internalAddr says whether ip is one berth's host reaches but the
// internet does not: loopback, link-local (169.254.169.254 included),
// private, shared, unspecified or multicast.
func internalAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsPrivate() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || sharedAddrSpace.Contains(ip)
}

// guardTransport returns a transport whose connections to internal
// addresses fail unless the registry (the host:port dialled, or the host
// alone) is listed. The check runs on the address actually connected to,
// after name resolution, so neither a DNS answer nor a redirect (to a blob
// store, to 169.254.169.254) gets past it.
func guardTransport(next http.RoundTripper, listed []string) (http.RoundTripper, error) {
	base, ok := next.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("image cache: refusing private registries needs an *http.Transport, not %T", next)
	}
	t := base.Clone()
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		allowed := slices.Contains(listed, addr) || slices.Contains(listed, host)
		d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
			Control: func(_, address string, _ syscall.RawConn) error {
				ap, err := netip.ParseAddrPort(address)
				if err == nil && internalAddr(ap.Addr()) && !allowed {
					return fmt.Errorf("%w: %s", errPrivate, addr)
				}
				return err
			}}
		return d.DialContext(ctx, network, addr)
	}
	return t, nil
}
