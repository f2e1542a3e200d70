package provider

import (
	"errors"
	"fmt"
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

// CheckConfig checks that name is a built-in provider and that raw is a
// provider_config it accepts. A name that is not built in gives an error
// wrapping ErrUnknownProvider; the caller may still find it as an external
// plugin, which checks its own config when it starts.
func CheckConfig(name string, raw []byte) error {
	regMu.Lock()
	f, ok := registry[name]
	regMu.Unlock()
	if !ok {
		return fmt.Errorf("%w %q: built-in providers are %v", ErrUnknownProvider, name, Names())
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
