package jobroot

import (
	"encoding/json"
	"strings"
)

// The runner's protocol with the executor and the launcher: portable, so
// that berth builds (as a client) where jobs in images cannot run.

// modeEnv selects what a re-executed berth binary does: "run" is the
// runner the executor starts, "init" the job's init inside its namespaces.
const modeEnv = "BERTH_JOBROOT"

// cacheEnv, set by a launcher, fixes the cache directory.
const cacheEnv = "BERTH_JOBROOT_CACHE"

// BuiltinRequest is the global SSH request with which berth's own SSH
// server (the local provider's sandboxes) says that it starts the job
// runner itself for the command "BERTH_JOBROOT=run berth", so that nothing
// needs to be installed.
const BuiltinRequest = "jobroot@berth-ci.dev"

// ExitSetupFailed is the runner's exit status when the job could not be
// started (the image or the instance failed); the last line on stderr then
// starts with ErrorPrefix. 125 is what `docker run` uses for the same.
const ExitSetupFailed = 125

// ErrorPrefix starts the stderr line that carries a setup failure as JSON
// (a SetupError).
const ErrorPrefix = "berth-runner-error: "

// SetupError is a failure to start the job, as the runner reports it.
type SetupError struct {
	// Image is the image the job named.
	Image string `json:"image"`
	// Reason is the GitLab failure reason: image_pull_failure or
	// runner_system_failure.
	Reason string `json:"reason"`
	// Message names the image and the cause.
	Message string `json:"message"`
}

// Error returns the message.
func (e *SetupError) Error() string { return e.Message }

// Harden is applied by the job's init right before it executes the job's
// command: set it to the sandbox's seccomp filter (package provider/local
// does, in an init function). Jobs never start while it is nil.
var Harden func() error

// Mounts, when set and true in the runner, gives this runner's jobs the
// mount calls of HardenMounts' filter (the local provider's image_builds):
// the job's command then starts in one more user and mount namespace,
// nested in its init's, so that the kernel locks every mount the init made
// (the /proc masks, the binds, the root) and those calls cannot undo them.
var Mounts func() bool

// HardenMounts is Harden for jobs that Mounts lets mount.
var HardenMounts func() error

// ParseSetupError finds the runner's setup failure in a job's output tail.
func ParseSetupError(tail []byte) *SetupError {
	i := strings.LastIndex(string(tail), ErrorPrefix)
	if i < 0 {
		return nil
	}
	line, _, _ := strings.Cut(string(tail[i+len(ErrorPrefix):]), "\n")
	var se SetupError
	if json.Unmarshal([]byte(line), &se) != nil {
		return nil
	}
	return &se
}
