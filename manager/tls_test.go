package manager

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
)

// selfSigned writes a certificate for name and 127.0.0.1 with its key.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "berth.pem"), filepath.Join(dir, "berth.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// tlsManager is a berth serving its API over TLS with a certificate for
// berth.test, as a test sees it.
type tlsManager struct {
	addr, port, token string
	// transport trusts the certificate and dials addr whatever the name.
	transport *http.Transport
}

// startTLSManager starts berth (sim provider) on a TLS listener until the
// test ends.
func startTLSManager(t *testing.T) tlsManager {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir, "berth.test")
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen = \"127.0.0.1:0\"\nstate_dir = %q\ntls_cert_file = %q\ntls_key_file = %q\n[autoscaler]\nprovider = \"sim\"\n",
		filepath.Join(dir, "state"), certFile, keyFile)), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	m, err := New(ctx, cfg, slog.New(slog.DiscardHandler), Options{Ready: ready, ShutdownGrace: time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tm := tlsManager{addr: <-ready}
	_, tm.port, _ = net.SplitHostPort(tm.addr)
	if tm.token, err = api.ReadTokenFile(filepath.Join(dir, "state", "api-token")); err != nil {
		t.Fatal(err)
	}
	tm.transport = &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, tm.addr)
		},
	}
	return tm
}

func TestAPIOverTLS(t *testing.T) {
	tm := startTLSManager(t)
	ctx := context.Background()
	addr, port, tok := tm.addr, tm.port, tm.token

	// A client that trusts the certificate and dials the name in it.
	hc := &http.Client{Transport: tm.transport}
	c := api.NewClient("https://berth.test:" + port)
	c.HTTP, c.Token = hc, tok
	if _, err := c.Submit(ctx, api.JobRequest{Script: "true"}); err != nil {
		t.Errorf("submit over TLS to the certificate's name: %v", err)
	}
	// Plain HTTP to the TLS port gets nothing from the API.
	plain := api.NewClient("http://" + addr)
	plain.Token = tok
	if _, err := plain.Jobs(ctx); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("plain HTTP to the TLS port: %v; want Go's 400 for an HTTP request to an HTTPS server", err)
	}
}

func TestBadTLSFilesStopStartup(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "c.pem"), []byte("not a certificate"), 0o644)
	os.WriteFile(filepath.Join(dir, "k.pem"), []byte("not a key"), 0o600)
	cfg, err := config.Parse([]byte(fmt.Sprintf("state_dir = %q\ntls_cert_file = \"c.pem\"\ntls_key_file = \"k.pem\"\n[autoscaler]\nprovider = \"sim\"\n", filepath.Join(dir, "state"))), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{})
	if err == nil || !strings.Contains(err.Error(), "tls_cert_file") || !strings.Contains(err.Error(), "PEM") {
		t.Errorf("start with a broken certificate: %v; want an error naming tls_cert_file", err)
	}
}
