package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/berth-ci/berth/config"
)

// The berth.toml gcpfake writes is a valid berth config whose
// provider_config is the JSON it prints.
func TestWriteConfigs(t *testing.T) {
	dir := t.TempDir()
	pc := map[string]any{"name": "berth-ci", "project": "p", "zone": "europe-west1-b", "endpoint": "http://127.0.0.1:1", "ssh_port": 2222,
		"suspend": true, "connector": map[string]any{"username": "berth", "key_path": filepath.Join(dir, "key.pem")}}
	js, _ := json.Marshal(pc)
	if err := writeConfigs(dir, js, pc, 7); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Autoscaler.Provider != "gcp" || c.Autoscaler.MaxInstances != 7 || c.StateDir != filepath.Join(dir, "berth-state") {
		t.Errorf("config: %+v", c.Autoscaler)
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
		t.Errorf("provider_config differs:\nTOML %v\nJSON %v", fromTOML, fromJSON)
	}
}
