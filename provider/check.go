package provider

import (
	"errors"
	"fmt"
	"os/exec"
)

// ConfigChecker is implemented by providers that can check their
// provider_config before Init, so that berth reports its problems together
// with every other config problem, at their line in the file.
type ConfigChecker interface {
	// CheckConfig checks the JSON form of provider_config without side
	// effects. It returns *ConfigError values (joined with errors.Join when
	// there are several), or another error for the table as a whole.
	CheckConfig(raw []byte) error
}

// ConfigError is one problem with one key of a provider_config.
type ConfigError struct {
	// Key is the key under provider_config, e.g. "network"; "" for the table.
	Key string
	// Message says what is wrong and what to do.
	Message string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return e.Message
	}
	return e.Key + ": " + e.Message
}

// CheckConfig checks that name is a provider berth can start and that raw
// is a provider_config it accepts. An unknown name gives an error wrapping
// ErrUnknownProvider. A name that is not built in but has a binary
// berth-provider-NAME on PATH is an external plugin, which checks its own
// config when it starts.
func CheckConfig(name string, raw []byte) error {
	regMu.Lock()
	f, ok := registry[name]
	regMu.Unlock()
	if !ok {
		if _, err := exec.LookPath("berth-provider-" + name); err == nil {
			return nil
		}
		return fmt.Errorf("%w %q: built-in providers are %v; an external one is a binary named berth-provider-%s on PATH, and there is none", ErrUnknownProvider, name, Names(), name)
	}
	if c, ok := f().(ConfigChecker); ok {
		return c.CheckConfig(raw)
	}
	return nil
}

// ConfigErrors splits an error from CheckConfig into its *ConfigError
// parts; an error of another kind is returned as one ConfigError for the
// whole table.
func ConfigErrors(err error) []*ConfigError {
	if err == nil {
		return nil
	}
	var out []*ConfigError
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var ce *ConfigError
		if errors.As(e, &ce) {
			out = append(out, ce)
			return
		}
		out = append(out, &ConfigError{Message: e.Error()})
	}
	walk(err)
	return out
}
