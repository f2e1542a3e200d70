// Package sandboxtest finds and kills the local provider's sandbox processes
// from outside berth, the way an operator or a crashing VM would, so tests can
// check for orphans and lose instances on purpose.
package sandboxtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// marker is the environment variable every sandbox process carries; its value
// is the instance's directory (see provider/local).
const marker = "BERTH_LOCAL_SANDBOX="

// Processes maps the PIDs of sandbox processes whose instance directory lies
// under dir to their instance IDs, read from /proc.
func Processes(dir string) map[int]string {
	prefix := marker + strings.TrimSuffix(dir, "/") + "/"
	procs := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if strings.HasPrefix(kv, prefix) {
				procs[pid] = filepath.Base(kv)
			}
		}
	}
	return procs
}

// Kill sends SIGKILL to every process of instance id under dir and returns
// how many it killed.
func Kill(dir, id string) int {
	killed := 0
	for pid, inst := range Processes(dir) {
		if inst == id && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}
