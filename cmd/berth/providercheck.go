package main

import (
	"errors"
	"fmt"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/plugin"
)

// checkProvider lets the config checker report an unknown provider and
// provider_config problems with every other config problem, with file:line.
// A name that is not built in must be a plugin binary where berth would
// start it from (plugin_dir, else next to berth, else $PATH).
func checkProvider(name, pluginDir string, raw []byte) []config.ProviderProblem {
	err := provider.CheckConfig(name, raw)
	if err == nil {
		return nil
	}
	if errors.Is(err, provider.ErrUnknownProvider) {
		_, ferr := plugin.Find(name, pluginDir)
		if ferr == nil {
			return nil
		}
		return []config.ProviderProblem{{Name: true, Message: fmt.Sprintf("%v; and it is not an external plugin: %v", err, ferr)}}
	}
	var out []config.ProviderProblem
	for _, ce := range provider.ConfigErrors(err) {
		out = append(out, config.ProviderProblem{Key: ce.Key, Message: ce.Message})
	}
	return out
}
