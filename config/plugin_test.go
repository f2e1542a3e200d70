package config

import (
	"strings"
	"testing"
)

func TestProviderPluginKeys(t *testing.T) {
	c, err := Parse([]byte("[autoscaler]\nprovider = \"aws\"\nplugin_dir = \"/opt/berth/plugins\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Autoscaler.Provider != "aws" || c.Autoscaler.PluginDir != "/opt/berth/plugins" || c.Autoscaler.ProviderPath != "" {
		t.Errorf("autoscaler = %+v", c.Autoscaler)
	}
	c, err = Parse([]byte("[autoscaler]\nprovider_path = \"/usr/lib/berth/berth-provider-aws\"\n"), "berth.toml")
	if err != nil || c.Autoscaler.ProviderPath != "/usr/lib/berth/berth-provider-aws" {
		t.Errorf("provider_path: %+v, %v", c.Autoscaler, err)
	}
	_, err = Parse([]byte("[autoscaler]\nprovider_path = \"bin/berth-provider-aws\"\nplugin_dir = \"plugins\"\n"), "berth.toml")
	for _, want := range []string{
		`berth.toml:2: autoscaler.provider_path = "bin/berth-provider-aws": must be an absolute path`,
		`berth.toml:3: autoscaler.plugin_dir = "plugins": must be an absolute path`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("relative paths: error %v; want it to contain %s", err, want)
		}
	}
}
