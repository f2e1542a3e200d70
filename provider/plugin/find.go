package plugin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinaryPrefix starts the file name of every provider plugin.
const BinaryPrefix = "berth-provider-"

// ErrNotFound is returned by Find when no plugin binary has the name.
var ErrNotFound = errors.New("provider plugin not found")

// Find returns the path of the binary berth-provider-NAME: in pluginDir if
// that is set, else next to the running berth binary, else on $PATH.
func Find(name, pluginDir string) (string, error) {
	file := BinaryPrefix + name
	var tried []string
	dirs := []string{pluginDir}
	if pluginDir == "" {
		dirs = nil
		if exe, err := os.Executable(); err == nil {
			dirs = append(dirs, filepath.Dir(exe))
		}
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
		tried = append(tried, dir)
	}
	if pluginDir == "" {
		if p, err := exec.LookPath(file); err == nil {
			return filepath.Abs(p)
		}
		tried = append(tried, "$PATH")
	}
	return "", fmt.Errorf("%w: no executable %s in %s; install the plugin there, set autoscaler.plugin_dir, or name the binary with autoscaler.provider_path", ErrNotFound, file, strings.Join(tried, ", "))
}

// NameOf is the plugin name of a binary path: NAME for berth-provider-NAME,
// else the file name.
func NameOf(path string) string {
	return strings.TrimPrefix(filepath.Base(path), BinaryPrefix)
}
