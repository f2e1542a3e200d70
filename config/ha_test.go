package config

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNoHATableKeepsASingleManager(t *testing.T) {
	c, err := Parse([]byte("listen = \"127.0.0.1:8765\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.HA != nil {
		t.Fatalf("HA = %+v without an [ha] table", c.HA)
	}
}

func TestHATableDefaultsAndPaths(t *testing.T) {
	// Paths are relative to the config file's directory, testdata/.
	src := "[ha]\netcd_endpoints = [\"https://10.0.0.1:2379\", \"https://10.0.0.2:2379\"]\nca_file = \"ha/ca.pem\"\nusername = \"berth\"\npassword = \"s3cret\"\n"
	c, err := Parse([]byte(src), "testdata/berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	h := c.HA
	if h == nil || len(h.EtcdEndpoints) != 2 || h.LeaseTTL != DefaultLeaseTTL || h.KeyPrefix != DefaultKeyPrefix || !h.TLS() ||
		h.Username != "berth" || h.Password != "s3cret" || !filepath.IsAbs(h.CAFile) || !strings.HasSuffix(h.CAFile, "testdata/ha/ca.pem") {
		t.Fatalf("HA = %+v", h)
	}
}

func TestBadHATables(t *testing.T) {
	const ha = "[ha]\n" // line 1
	const ep = "etcd_endpoints = [\"http://127.0.0.1:2379\"]\n"
	tests := []struct {
		name, toml, key string
		line            int
		msg             string
	}{
		{"no endpoints", ha + "lease_ttl = \"10s\"\n", "ha.etcd_endpoints", 0, "must list the etcd cluster's client URLs"},
		{"endpoint without scheme", ha + "etcd_endpoints = [\"10.0.0.1:2379\"]\n", "ha.etcd_endpoints[0]", 2, "etcd client URL"},
		{"endpoint without port", ha + "etcd_endpoints = [\"https://etcd1\"]\n", "ha.etcd_endpoints[0]", 2, "needs a port"},
		{"endpoint with a path", ha + "etcd_endpoints = [\"https://etcd1:2379/v3\"]\n", "ha.etcd_endpoints[0]", 2, "etcd client URL"},
		{"mixed schemes", ha + "etcd_endpoints = [\"https://a:2379\", \"http://b:2379\"]\n", "ha.etcd_endpoints", 2, "mixes http:// and https://"},
		{"TLS files with http", ha + ep + "ca_file = \"ha/ca.pem\"\n", "ha.etcd_endpoints", 2, "write the endpoints as https://"},
		{"lease too short", ha + ep + "lease_ttl = \"1s\"\n", "ha.lease_ttl", 3, "at least 2s"},
		{"lease not whole seconds", ha + ep + "lease_ttl = \"2500ms\"\n", "ha.lease_ttl", 3, "whole seconds"},
		{"lease not a duration", ha + ep + "lease_ttl = 10\n", "ha.lease_ttl", 3, "duration string"},
		{"prefix without slashes", ha + ep + "key_prefix = \"berth\"\n", "ha.key_prefix", 3, "start and end with"},
		{"cert without key", ha + ep + "cert_file = \"ha/ca.pem\"\n", "ha.cert_file", 3, "go together"},
		{"unreadable ca", ha + "etcd_endpoints = [\"https://a:2379\"]\nca_file = \"ha/none.pem\"\n", "ha.ca_file", 3, "cannot be read"},
		{"user without password", ha + ep + "username = \"berth\"\n", "ha.username", 0, "go together"},
		{"advertise_url without scheme", ha + ep + "advertise_url = \"10.0.0.5:8765\"\n", "ha.advertise_url", 3, "URL the other managers reach"},
		{"advertise_url with a path", ha + ep + "advertise_url = \"http://10.0.0.5:8765/api\"\n", "ha.advertise_url", 3, "no path"},
		{"typo", ha + ep + "lease_tll = \"10s\"\n", "ha.lease_tll", 3, `did you mean "lease_ttl"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.toml), "testdata/berth.toml")
			if err == nil {
				t.Fatalf("no error; config %+v", c.HA)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is %T, want *Error: %v", err, err)
			}
			for _, is := range ce.Issues {
				if is.Key == tt.key && (tt.line == 0 || is.Line == tt.line) && strings.Contains(is.Message, tt.msg) {
					return
				}
			}
			t.Errorf("want an issue for %q (line %s) containing %q; got:\n%v", tt.key, strconv.Itoa(tt.line), tt.msg, err)
		})
	}
}

// advertise_url is kept as written; provider_state_dir is resolved
// against the config file's directory like every other path.
func TestHAAdvertiseURLAndProviderDir(t *testing.T) {
	c, err := Parse([]byte("[ha]\netcd_endpoints = [\"http://127.0.0.1:2379\"]\nadvertise_url = \"https://berth-1.example:8765\"\nprovider_state_dir = \"shared/provider\"\n"), "testdata/berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.HA.AdvertiseURL != "https://berth-1.example:8765" || !filepath.IsAbs(c.HA.ProviderStateDir) || !strings.HasSuffix(c.HA.ProviderStateDir, "testdata/shared/provider") {
		t.Fatalf("HA = %+v", c.HA)
	}
}

// A password never shows in a message, even in one about itself.
func TestHAPasswordIsRedacted(t *testing.T) {
	_, err := Parse([]byte("[ha]\netcd_endpoints = [\"http://127.0.0.1:2379\"]\npassword = 12345\n"), "berth.toml")
	if err == nil || strings.Contains(err.Error(), "12345") {
		t.Fatalf("error %v shows the password", err)
	}
	c, err := Parse([]byte("[ha]\netcd_endpoints = [\"http://10.0.0.9:2379\"]\nusername = \"u\"\npassword = \"hunter2\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Message, "clear text") || strings.Contains(c.Warnings[0].String(), "hunter2") {
		t.Fatalf("warnings = %v, want one about the password in clear text, without it", c.Warnings)
	}
	if c.HA.LeaseTTL != 10*time.Second {
		t.Fatalf("lease_ttl = %s", c.HA.LeaseTTL)
	}
}
