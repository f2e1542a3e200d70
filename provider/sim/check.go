package sim

import (
	"bytes"
	"encoding/json"

	"github.com/berth-ci/berth/provider"
)

// CheckConfig checks a provider_config for the sim provider without side
// effects (provider.ConfigChecker).
func (g *Group) CheckConfig(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return &provider.ConfigError{Message: err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return &provider.ConfigError{Message: err.Error()}
	}
	return nil
}
