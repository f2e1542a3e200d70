package ha

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-ci/berth/config"
)

// dialTimeout bounds connecting to one endpoint.
const dialTimeout = 5 * time.Second

// keepAlive makes a connection to a dead or partitioned member fail over
// to another member well within a lease, instead of waiting for TCP.
const (
	keepAliveTime    = 3 * time.Second
	keepAliveTimeout = 2 * time.Second
)

// Dial returns a client of the cluster in h, with its TLS files and
// credentials. It does not wait for the cluster: the first request says
// whether it is reachable.
func Dial(h *config.HA) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:            h.EtcdEndpoints,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		Username:             h.Username,
		Password:             h.Password,
		// etcd's client logs through zap; berth reports what matters itself.
		Logger: zap.NewNop(),
	}
	if h.TLS() {
		tlsCfg, err := clientTLS(h)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tlsCfg
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		hint := "check ha.etcd_endpoints and the cluster's health (etcdctl endpoint health)"
		if h.Username != "" {
			hint += ", and ha.username and ha.password"
		}
		return nil, fmt.Errorf("ha: connect to etcd at %v: %w; %s", h.EtcdEndpoints, err, hint)
	}
	return cli, nil
}

// clientTLS builds the TLS settings: the system's roots, or only ca_file's
// certificates when set, and the client certificate when set.
func clientTLS(h *config.HA) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if h.CAFile != "" {
		pem, err := os.ReadFile(h.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ha: read ca_file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ha: ca_file %s holds no PEM certificate; give the CA that signed the etcd servers' certificates", h.CAFile)
		}
	}
	if h.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(h.CertFile, h.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("ha: load the client certificate cert_file %s with key_file %s: %w; both must be PEM and match", h.CertFile, h.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Open dials the cluster in h and opens the state under its key prefix,
// failing when etcd does not answer within ctx: a manager that cannot
// reach etcd must not start (it would not know the fleet).
func Open(ctx context.Context, h *config.HA) (*clientv3.Client, *Store, error) {
	cli, err := Dial(h)
	if err != nil {
		return nil, nil, err
	}
	s, err := OpenStore(ctx, cli, h.KeyPrefix)
	if err != nil {
		cli.Close()
		return nil, nil, fmt.Errorf("ha: %w", err)
	}
	return cli, s, nil
}
