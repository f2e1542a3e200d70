package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/berth-ci/berth/provider"
)

// CheckConfig checks a provider_config for the local provider without side
// effects (provider.ConfigChecker), so config errors come with file and line
// before berth starts anything.
func (p *Provider) CheckConfig(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return &provider.ConfigError{Message: "must be a table: " + err.Error()}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		v := m[k]
		var s string
		switch k {
		case "network", "memory_max":
			if err := json.Unmarshal(v, &s); err != nil {
				errs = append(errs, &provider.ConfigError{Key: k, Message: "must be a string"})
				continue
			}
		default:
			errs = append(errs, &provider.ConfigError{Key: k, Message: "unknown key for the local provider; valid keys: network, memory_max"})
			continue
		}
		if k == "network" {
			switch s {
			case "", "auto", "host", "isolated":
			default:
				errs = append(errs, &provider.ConfigError{Key: k, Message: fmt.Sprintf("%q is not one of auto, host, isolated", s)})
			}
		}
	}
	return errors.Join(errs...)
}
