package main

import (
	"errors"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/provider"
)

// checkProvider lets the config checker report an unknown provider and
// provider_config problems with every other config problem, with file:line.
func checkProvider(name string, raw []byte) []config.ProviderProblem {
	err := provider.CheckConfig(name, raw)
	if err == nil {
		return nil
	}
	if errors.Is(err, provider.ErrUnknownProvider) {
		return []config.ProviderProblem{{Name: true, Message: err.Error()}}
	}
	var out []config.ProviderProblem
	for _, ce := range provider.ConfigErrors(err) {
		out = append(out, config.ProviderProblem{Key: ce.Key, Message: ce.Message})
	}
	return out
}
