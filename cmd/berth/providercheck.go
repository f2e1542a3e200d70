package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/plugin"
	"github.com/berth-ci/berth/sdk"
)

// checkProvider lets the config checker report an unknown provider and
// provider_config problems with every other config problem, with file:line.
// A name that is not built in must be a plugin binary where berth would
// start it from (plugin_dir, else next to berth, else $PATH; an absolute
// name is provider_path's binary), and `berth config check` starts the
// plugin to check its provider_config as its Init would, so that a file the
// check calls valid is one berth run starts with.
func checkProvider(name, pluginDir string, raw []byte) []config.ProviderProblem {
	return providerProblems(name, pluginDir, raw, true)
}

// findProvider is checkProvider for berth run, which starts the plugin
// anyway: its Init refuses a bad provider_config, so it is not started twice.
func findProvider(name, pluginDir string, raw []byte) []config.ProviderProblem {
	return providerProblems(name, pluginDir, raw, false)
}

func providerProblems(name, pluginDir string, raw []byte, askPlugin bool) []config.ProviderProblem {
	path := name
	if !filepath.IsAbs(name) {
		err := provider.CheckConfig(name, raw)
		if err != nil && !errors.Is(err, provider.ErrUnknownProvider) {
			return problems(err)
		} else if err == nil {
			return nil
		}
		var ferr error
		if path, ferr = plugin.Find(name, pluginDir); ferr != nil {
			return []config.ProviderProblem{{Name: true, Message: fmt.Sprintf("%v; and it is not an external plugin: %v", err, ferr)}}
		}
	}
	if !askPlugin {
		return nil
	}
	err := plugin.CheckConfig(context.Background(), path, raw, nil)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sdk.ErrCheckUnsupported):
		return []config.ProviderProblem{{Warning: true, Message: fmt.Sprintf(
			"the plugin %s cannot check its provider_config before it starts (built before berth's CheckConfig call); "+
				"berth run checks it when it starts the plugin", path)}}
	}
	var ce *provider.ConfigError
	if errors.As(err, &ce) {
		return problems(err)
	}
	return []config.ProviderProblem{{Name: true, Message: fmt.Sprintf("the plugin %s could not be asked to check provider_config: %v", path, err)}}
}

func problems(err error) []config.ProviderProblem {
	var out []config.ProviderProblem
	for _, ce := range provider.ConfigErrors(err) {
		out = append(out, config.ProviderProblem{Key: ce.Key, Message: ce.Message})
	}
	return out
}
