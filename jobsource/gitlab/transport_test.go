package gitlab

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// A GitLab whose certificate a private CA signed is reached with ca_file,
// and refused without it.
func TestHTTPClientTrustsCAFile(t *testing.T) {
	gl := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer gl.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gl.Certificate().Raw})
	if err := os.WriteFile(ca, pemData, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewHTTPClient(ca, "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(gl.URL)
	if err != nil {
		t.Fatalf("with ca_file: %v", err)
	}
	resp.Body.Close()
	plain, _ := NewHTTPClient("", "")
	if resp, err := plain.Get(gl.URL); err == nil {
		resp.Body.Close()
		t.Fatal("a certificate of an unknown CA was accepted without ca_file")
	}
	if _, err := NewHTTPClient(filepath.Join(t.TempDir(), "missing.pem"), ""); err == nil {
		t.Error("a missing ca_file was accepted")
	}
}

// With proxy set, requests go to the proxy (as absolute-URI requests for
// plain http), whatever the environment says.
func TestHTTPClientUsesProxy(t *testing.T) {
	var got string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.String()
		io.WriteString(w, "via proxy")
	}))
	defer proxy.Close()
	c, err := NewHTTPClient("", proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get("http://gitlab.invalid/api/v4/runners/verify")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != "http://gitlab.invalid/api/v4/runners/verify" {
		t.Errorf("proxy saw %q", got)
	}
	if _, err := NewHTTPClient("", "::"); err == nil {
		t.Error("a bad proxy URL was accepted")
	}
}
