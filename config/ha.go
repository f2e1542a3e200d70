package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// HA defaults.
const (
	// DefaultLeaseTTL is how long a silent leader keeps its lease: a
	// standby takes over after at most this long.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultKeyPrefix is where the state lives in etcd.
	DefaultKeyPrefix = "/berth/"
	// minLeaseTTL is etcd's smallest lease with its default election
	// timeout (1 s): etcd silently raises a shorter TTL to it.
	minLeaseTTL = 2 * time.Second
)

// HA is the [ha] table: several managers share one fleet through an etcd
// cluster, one leading at a time. Without the table berth keeps its state
// in the bbolt file and runs alone.
type HA struct {
	// EtcdEndpoints are the cluster's client URLs ("https://10.0.0.1:2379").
	EtcdEndpoints []string
	// LeaseTTL bounds how long a leader that went silent (crashed, paused,
	// cut off) keeps the fleet: whole seconds, at least 2 s.
	LeaseTTL time.Duration
	// KeyPrefix is the etcd key prefix of this fleet's state; it ends in "/".
	KeyPrefix string
	// CAFile verifies the etcd servers; CertFile and KeyFile (both or
	// neither) are berth's client certificate. Absolute after loading.
	CAFile, CertFile, KeyFile string
	// Username and Password authenticate to etcd (both or neither).
	Username, Password string
	// AdvertiseURL is this manager's API as the other managers reach it
	// ("http://10.0.0.5:8765"): a standby forwards API requests there while
	// this manager leads. Empty: derived from listen at start.
	AdvertiseURL string
	// ProviderStateDir, when set, is the provider's state directory instead
	// of <state_dir>/provider/<name>: managers sharing one host (the local
	// provider serves only its own machine) must share it. Absolute after
	// loading.
	ProviderStateDir string
}

// TLS reports whether berth talks TLS to etcd.
func (h *HA) TLS() bool {
	return h.CAFile != "" || h.CertFile != "" || strings.HasPrefix(h.EtcdEndpoints[0], "https://")
}

func (d *decoder) ha(t *table) *HA {
	h := &HA{LeaseTTL: DefaultLeaseTTL, KeyPrefix: DefaultKeyPrefix}
	t.strings("etcd_endpoints", &h.EtcdEndpoints)
	t.duration("lease_ttl", &h.LeaseTTL)
	t.str("key_prefix", &h.KeyPrefix)
	for key, dst := range map[string]*string{"ca_file": &h.CAFile, "cert_file": &h.CertFile, "key_file": &h.KeyFile} {
		if t.str(key, dst) {
			*dst = d.resolvePath(t.key(key), *dst)
		}
	}
	t.str("username", &h.Username)
	t.str("password", &h.Password)
	t.str("advertise_url", &h.AdvertiseURL)
	if t.str("provider_state_dir", &h.ProviderStateDir) {
		h.ProviderStateDir = d.resolvePath(t.key("provider_state_dir"), h.ProviderStateDir)
	}
	t.finish()
	return h
}

// checkHA checks the [ha] table when present.
func (c *Config) checkHA(k *checker) {
	h := c.HA
	if h == nil {
		return
	}
	checkEndpoints(k, h)
	switch {
	case h.LeaseTTL < minLeaseTTL:
		k.fail("ha.lease_ttl", h.LeaseTTL, "must be at least %s (etcd raises shorter leases to that); the default is %s", minLeaseTTL, DefaultLeaseTTL)
	case h.LeaseTTL%time.Second != 0:
		k.fail("ha.lease_ttl", h.LeaseTTL, "must be whole seconds (etcd leases count seconds), e.g. %q", "10s")
	case h.LeaseTTL > time.Minute:
		k.warn("ha.lease_ttl", h.LeaseTTL, "no job starts for up to this long after the leader dies; %s is the default", DefaultLeaseTTL)
	}
	if !strings.HasPrefix(h.KeyPrefix, "/") || !strings.HasSuffix(h.KeyPrefix, "/") || len(h.KeyPrefix) < 2 {
		k.fail("ha.key_prefix", h.KeyPrefix, "must start and end with \"/\", e.g. %q, so that one fleet's keys never share a prefix with another's", DefaultKeyPrefix)
	}
	if (h.CertFile == "") != (h.KeyFile == "") {
		key := "ha.cert_file"
		if h.CertFile == "" {
			key = "ha.key_file"
		}
		k.fail(key, nil, "ha.cert_file and ha.key_file go together: set both (berth's PEM client certificate and its key) or neither")
	}
	for key, path := range map[string]string{"ha.ca_file": h.CAFile, "ha.cert_file": h.CertFile, "ha.key_file": h.KeyFile} {
		if path == "" {
			continue
		}
		if f, err := os.Open(path); err != nil {
			k.fail(key, nil, "cannot be read (%s): %v; check the path and that berth's user may read it", path, unwrapPathError(err))
		} else {
			f.Close()
		}
	}
	if (h.Username == "") != (h.Password == "") {
		k.fail("ha.username", nil, "ha.username and ha.password go together: set both or neither")
	}
	if h.AdvertiseURL != "" {
		u, err := url.Parse(h.AdvertiseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			k.fail("ha.advertise_url", h.AdvertiseURL, "must be the URL the other managers reach this berth's API at, such as %q (scheme, host and port, no path)", "http://10.0.0.5:8765")
		}
	}
}

// checkEndpoints wants at least one endpoint, all of one scheme, and TLS
// wherever a password or a certificate would otherwise cross the network.
func checkEndpoints(k *checker, h *HA) {
	if len(h.EtcdEndpoints) == 0 {
		k.fail("ha.etcd_endpoints", nil, "must list the etcd cluster's client URLs, e.g. [\"https://10.0.0.1:2379\", \"https://10.0.0.2:2379\", \"https://10.0.0.3:2379\"]; remove [ha] to run a single manager on the state file")
		return
	}
	schemes := map[string]bool{}
	remote := false
	for i, ep := range h.EtcdEndpoints {
		key := fmt.Sprintf("ha.etcd_endpoints[%d]", i)
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
			k.fail(key, ep, "must be an etcd client URL such as %q or %q", "https://10.0.0.1:2379", "http://127.0.0.1:2379")
			continue
		}
		if _, _, err := net.SplitHostPort(u.Host); err != nil {
			k.fail(key, ep, "needs a port, e.g. %q (etcd's client port is 2379)", u.Scheme+"://"+u.Host+":2379")
			continue
		}
		schemes[u.Scheme] = true
		remote = remote || !IsLoopbackHost(u.Hostname())
	}
	if len(schemes) > 1 {
		k.fail("ha.etcd_endpoints", nil, "mixes http:// and https://; a cluster serves clients one way: use the same scheme for every member")
		return
	}
	if schemes["http"] && (h.CAFile != "" || h.CertFile != "") {
		k.fail("ha.etcd_endpoints", nil, "are http:// but ha.ca_file or ha.cert_file is set: write the endpoints as https:// to talk TLS to etcd")
	}
	if schemes["http"] && remote && h.Password != "" {
		k.warn("ha.password", nil, "is sent in clear text to http:// endpoints beyond this machine; serve etcd over TLS and write the endpoints as https://")
	}
}
