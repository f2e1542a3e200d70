package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/berth-ci/berth/provider"
)

// CheckConfig checks a provider_config for the local provider without side
// effects (provider.ConfigChecker), so config errors come with file and line
// before berth starts anything. Unknown keys are reported one by one; the
// values are checked by the same parser Init uses.
func (p *Provider) CheckConfig(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return &provider.ConfigError{Message: "must be a table: " + err.Error()}
	}
	known := strings.Split(configKeys, ", ")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if !slices.Contains(known, k) {
			errs = append(errs, &provider.ConfigError{Key: k, Message: "unknown key for the local provider; valid keys: " + configKeys})
			continue
		}
		// Each value alone through Init's own parser, so that a problem is
		// reported at its key's line.
		one, _ := json.Marshal(map[string]json.RawMessage{k: m[k]})
		if _, err := parseConfig(one); err != nil {
			msg := strings.TrimPrefix(err.Error(), "local provider: ")
			msg = strings.TrimPrefix(msg, "provider_config ")
			msg = strings.TrimPrefix(msg, k+" ")
			errs = append(errs, &provider.ConfigError{Key: k, Message: msg})
		}
	}
	return errors.Join(errs...)
}
