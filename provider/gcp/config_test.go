package gcp

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"name": "ci", "project": "p", "zone": "europe-west1-b", "connector": {"key_path": "/k"}, "instance_ready_timeout": "90s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Connector.Username != DefaultUsername || c.SSHPort != 22 || !c.UsePrivateAddress || c.InstanceReadyTimeout != 90*time.Second || c.Suspend {
		t.Errorf("config %+v: defaults not applied", c)
	}
}

func TestParseConfigErrorsSayWhatToFix(t *testing.T) {
	for cfg, want := range map[string]string{
		``: "provider_config is empty",
		`{"name": "ci", "project": "p", "zone": "z", "connector": {"key_path": "/k"}, "zones": "x"}`:                  "known keys",
		`{"project": "p", "zone": "z", "connector": {"key_path": "/k"}}`:                                              "name is empty",
		`{"name": "ci", "zone": "z", "connector": {"key_path": "/k"}}`:                                                "project is empty",
		`{"name": "ci", "project": "p", "connector": {"key_path": "/k"}}`:                                             "set zone",
		`{"name": "ci", "project": "p", "zone": "z", "region": "r", "connector": {"key_path": "/k"}}`:                 "zonal or regional",
		`{"name": "ci", "project": "p", "zone": "z"}`:                                                                 "connector.key_path is empty",
		`{"name": "ci", "project": "p", "zone": "z", "connector": {"key_path": "/k"}, "credentials_file": "/nope"}`:   "credentials_file",
		`{"name": "ci", "project": "p", "zone": "z", "connector": {"key_path": "/k"}, "instance_ready_timeout": "x"}`: "Go duration",
	} {
		if _, err := ParseConfig([]byte(cfg)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%s) = %v; want an error saying %q", cfg, err, want)
		}
	}
}
