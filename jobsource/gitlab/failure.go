package gitlab

import (
	"slices"

	"github.com/berth-ci/berth/jobsource"
)

// GitLab failure_reason values a runner sends.
const (
	reasonScript             = "script_failure"
	reasonSystem             = "runner_system_failure"
	reasonTimeout            = "job_execution_timeout"
	reasonUnknown            = "unknown_failure"
	reasonConfiguration      = "runner_configuration_error"
	reasonExternalDependency = "runner_external_dependency_failure"
	reasonInterrupted        = "runner_interrupted"
	reasonCanceled           = "job_canceled"
	reasonImagePull          = "image_pull_failure"
	reasonUnsupported        = "runner_unsupported"
	reasonMissingDependency  = "missing_dependency_failure"
)

// baseReasons are understood by every GitLab version, so they are used when
// an older server sends no features.failure_reasons list.
var baseReasons = []string{reasonScript, reasonSystem, reasonTimeout, reasonUnknown}

// fallbacks says what to send instead of a reason the server does not list;
// unknown_failure is the last resort. GitLab rejects values it does not know,
// which would leave the job running until its own timeout.
var fallbacks = map[string]string{
	reasonConfiguration:      reasonScript,
	reasonExternalDependency: reasonSystem,
	reasonInterrupted:        reasonUnknown,
	reasonCanceled:           reasonUnknown,
	reasonImagePull:          reasonSystem,
	reasonUnsupported:        reasonScript,
	reasonMissingDependency:  reasonScript,
	reasonScript:             reasonUnknown,
	reasonSystem:             reasonUnknown,
	reasonTimeout:            reasonUnknown,
}

// failureReason maps a berth failure to the reason GitLab should show.
func failureReason(kind jobsource.FailureKind) string {
	switch kind {
	case jobsource.FailureNone:
		return ""
	case jobsource.FailureScript:
		return reasonScript
	case jobsource.FailureSystem:
		return reasonSystem
	case jobsource.FailureTimeout:
		return reasonTimeout
	case jobsource.FailureImagePull:
		return reasonImagePull
	case jobsource.FailureCanceled:
		// GitLab already knows the job is canceled; the final state only
		// closes it, so a reason it may not list is fine to fall back from.
		return reasonCanceled
	default:
		return reasonUnknown
	}
}

// allowedReason returns want if the job's features.failure_reasons allows it,
// else the first allowed fallback, ending at unknown_failure.
func allowedReason(want string, allowed []string) string {
	if want == "" {
		return ""
	}
	if len(allowed) == 0 {
		allowed = baseReasons
	}
	for r := want; ; {
		if r == reasonUnknown || slices.Contains(allowed, r) {
			return r
		}
		next, ok := fallbacks[r]
		if !ok {
			return reasonUnknown
		}
		r = next
	}
}

// prepareError is a job that could not start, with the reason GitLab
// should show: a job's configuration berth cannot run is not the runner
// failing (runner_system_failure would tell users to retry it).
type prepareError struct {
	reason string
	msg    string
}

func (e *prepareError) Error() string { return e.msg }

// prepFailure is why Prepare failed, when the result is that failure (the
// manager reports every Prepare error as a system failure).
func (j *Job) prepFailure(r jobsource.Result) *prepareError {
	pe := j.failed.Load()
	if pe == nil || r.Failure != jobsource.FailureSystem {
		return nil
	}
	return pe
}
