package fakehost

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/berth-ci/berth/config"
)

// The berth.toml each fake's command writes is a valid berth config whose
// provider_config is the JSON it prints, whatever the provider_config
// holds.
func TestWriteConfigs(t *testing.T) {
	for provider, pc := range map[string]map[string]any{
		"aws": {"name": "berth-ci", "region": "eu-west-1", "endpoint": "http://127.0.0.1:1", "ssh_port": 2222,
			"suspend": true, "connector": map[string]any{"username": "ec2-user", "key_path": "/k/key.pem"}},
		"gcp": {"name": "berth-ci", "project": "p", "zone": "europe-west1-b", "endpoint": "http://127.0.0.1:1", "ssh_port": 2222,
			"suspend": true, "connector": map[string]any{"username": "berth", "key_path": "/k/key.pem"}},
		"azure": {"subscription_id": "s", "resource_group": "berth", "name": "berth-ci", "endpoint": "https://127.0.0.1:1", "ssh_port": 2222,
			"suspend": true, "max_size": 7, "connector": map[string]any{"key_path": "/k/key.pem"}},
	} {
		dir := t.TempDir()
		js, _ := json.Marshal(pc)
		if err := WriteConfigs(dir, "# a fake\n", provider, js, pc, 7); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(filepath.Join(dir, "berth.toml"))
		if err != nil {
			t.Fatalf("%s: %v", provider, err)
		}
		if c.Autoscaler.Provider != provider || c.Autoscaler.MaxInstances != 7 || c.StateDir != filepath.Join(dir, "berth-state") {
			t.Errorf("%s: config %+v", provider, c.Autoscaler)
		}
		var fromTOML, fromJSON map[string]any
		json.Unmarshal(c.Autoscaler.ProviderConfig, &fromTOML)
		data, err := os.ReadFile(filepath.Join(dir, "provider_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &fromJSON); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromTOML, fromJSON) {
			t.Errorf("%s: provider_config differs:\nTOML %v\nJSON %v", provider, fromTOML, fromJSON)
		}
	}
}
