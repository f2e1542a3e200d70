package aws

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"name": "ci", "connector": {"key_path": "/k"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Name: "ci", Connector: Connector{Username: "ec2-user", KeyPath: "/k"}, UsePrivateAddress: true,
		SSHPort: 22, InstanceReadyTimeout: 10 * time.Minute}
	if c != want {
		t.Errorf("ParseConfig = %+v, want %+v", c, want)
	}
}

func TestParseConfigFull(t *testing.T) {
	c, err := ParseConfig([]byte(`{"name": "ci", "region": "us-east-2", "profile": "berth", "endpoint": "http://127.0.0.1:4566",
		"connector": {"username": "ubuntu", "use_instance_connect": true}, "use_private_address": false, "ssh_port": 2222,
		"instance_ready_timeout": "3m", "suspend": true, "hibernate": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Region != "us-east-2" || c.Profile != "berth" || c.Endpoint != "http://127.0.0.1:4566" || c.Connector.Username != "ubuntu" ||
		!c.Connector.UseInstanceConnect || c.UsePrivateAddress || c.SSHPort != 2222 || c.InstanceReadyTimeout != 3*time.Minute || !c.Suspend || !c.Hibernate {
		t.Errorf("ParseConfig = %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{``, "set at least name"},
		{`{"connector": {"key_path": "/k"}}`, "name is empty"},
		{`{"name": "ci"}`, "key_path"},
		{`{"name": "ci", "connector": {"key_path": "/k", "use_instance_connect": true}}`, "choose one"},
		{`{"name": "ci", "conector": {}}`, "known keys"},
		{`{"name": "ci", "connector": {"key_path": "/k"}, "instance_ready_timeout": "soon"}`, "Go duration"},
		{`{"name": "ci", "connector": {"key_path": "/k"}, "ssh_port": 0}`, "ssh_port"},
		{`{"name": "ci", "connector": {"key_path": "/k"}, "hibernate": true}`, "suspend = true"},
	} {
		_, err := ParseConfig([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseConfig(%s) = %v; want an error saying %q", c.json, err, c.want)
		}
	}
}
