package gitlab

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/berth-ci/berth/internal/buildinfo"
)

// A job's variables are modelled on gitlab-runner's (common/build.go
// GetAllVariables, common/spec/variables.go): the runner's own variables
// that come before the job's, GitLab's payload variables, then the runner's
// variables that come after (so a job cannot override those), expanded
// once. Expansion is a single pass against the unexpanded list, the last
// definition of a name wins, $$ is a literal $, raw variables are left
// alone, a reference to a file variable gives its file's path, and a file
// variable's content is expanded too unless it is raw.
//
// The builds dir is known only on the instance (it defaults to the login
// user's $HOME/builds), so in Go it is buildsDirMark; the scripts turn the
// mark into the builds dir (shellValue), the stages into the path they
// resolved (resolveMarks).

// buildsDirMark stands for $CI_BUILDS_DIR in expanded values until the
// builds dir is known: a NUL cannot appear in a variable's value.
const buildsDirMark = "\x00builds"

// runnerEnv is what the runner knows about a job besides its payload.
type runnerEnv struct {
	version     string
	projectRel  string // the project dir relative to the builds dir; "" while unknown
	tmpName     string // the job's temp dir, in the builds dir
	image       string // the image the job runs in; "" for the instance's shell
	concurrent  int    // CI_CONCURRENT_ID
	projectSlot int    // CI_CONCURRENT_PROJECT_ID
	timeout     time.Duration
	caChain     string // PEM berth trusts for GitLab; "" for the system's
}

// jobVars is a job's variables, in gitlab-runner's order and expanded.
type jobVars []jobVariable

// gitlabEnvFile is GITLAB_ENV's file in the job's temp dir: KEY=VALUE
// lines a step writes for the steps after it.
const gitlabEnvFile = "gitlab_env"

// tmpDir is the job's temp dir (RUNNER_TEMP_PROJECT_DIR), where file
// variables' files live.
func (e runnerEnv) tmpDir() string { return buildsDirMark + "/." + e.tmpName }

// runnerVariables returns the runner-set variables that come before the
// job's own and those that come after them, as gitlab-runner orders them.
func runnerVariables(e runnerEnv) (before, after []jobVariable) {
	set := func(to *[]jobVariable, k, v string) {
		*to = append(*to, jobVariable{Key: k, Value: v, Public: true})
	}
	if e.image != "" {
		set(&before, "CI_JOB_IMAGE", e.image)
	}
	set(&before, "CI_BUILDS_DIR", buildsDirMark)
	if e.projectRel != "" {
		set(&before, "CI_PROJECT_DIR", buildsDirMark+"/"+e.projectRel)
	}
	set(&before, "CI_CONCURRENT_ID", strconv.Itoa(e.concurrent))
	set(&before, "CI_CONCURRENT_PROJECT_ID", strconv.Itoa(e.projectSlot))
	set(&before, "CI_SERVER", "yes")
	set(&before, "CI_JOB_STATUS", "running")
	set(&before, "CI_JOB_TIMEOUT", strconv.FormatInt(int64(e.timeout/time.Second), 10))
	if e.caChain != "" {
		before = append(before, jobVariable{Key: "CI_SERVER_TLS_CA_FILE", Value: e.caChain, Public: true, File: true})
	}
	// An image job gets a fresh root of its image, as a docker
	// executor's container; a shell job shares the instance with the
	// jobs before it.
	if e.image != "" {
		set(&after, "CI_DISPOSABLE_ENVIRONMENT", "true")
	} else {
		set(&after, "CI_SHARED_ENVIRONMENT", "true")
	}
	set(&after, "CI_RUNNER_VERSION", e.version)
	set(&after, "CI_RUNNER_REVISION", buildinfo.Read().Commit)
	set(&after, "CI_RUNNER_EXECUTABLE_ARCH", runtime.GOOS+"/"+runtime.GOARCH)
	set(&after, "RUNNER_TEMP_PROJECT_DIR", e.tmpDir())
	set(&after, "GITLAB_ENV", e.tmpDir()+"/"+gitlabEnvFile)
	return before, after
}

// newJobVars builds and expands a job's variables.
func newJobVars(payload []jobVariable, e runnerEnv) jobVars {
	before, after := runnerVariables(e)
	all := make(jobVars, 0, len(before)+len(payload)+len(after))
	all = append(append(append(all, before...), payload...), after...)
	return all.expandWith(all)
}

// expandWith expands every variable but the raw ones against source.
func (vs jobVars) expandWith(source jobVars) jobVars {
	out := make(jobVars, len(vs))
	for i, v := range vs {
		if !v.Raw {
			v.Value = source.expand(v.Value)
		}
		out[i] = v
	}
	return out
}

// expand resolves $VAR and ${VAR} in s as gitlab-runner does: unknown
// names are empty, $$ is $, a file variable is its file's path.
func (vs jobVars) expand(s string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	return os.Expand(s, vs.get)
}

// get is a name's value for expansion (gitlab-runner's Variables.Get).
func (vs jobVars) get(key string) string {
	switch key {
	case "$":
		return "$"
	case "*", "#", "@", "!", "?", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9":
		return ""
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Key == key {
			if vs[i].File {
				return vs.value("RUNNER_TEMP_PROJECT_DIR") + "/" + key
			}
			return vs[i].Value
		}
	}
	return ""
}

// value is a name's last value; a file variable's is its content.
func (vs jobVars) value(key string) string {
	return lastValue(vs, key)
}

// resolveMarks replaces the builds dir mark with the builds dir.
func resolveMarks(s, builds string) string {
	return strings.ReplaceAll(s, buildsDirMark, builds)
}

// shellValue is v as one shell word in which the builds dir mark becomes
// the expansion of the shell variable buildsVar and nothing else expands.
func shellValue(v, buildsVar string) string {
	parts := strings.Split(v, buildsDirMark)
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString(`"$` + buildsVar + `"`)
		}
		if p != "" || len(parts) == 1 {
			b.WriteString(shellQuote(p))
		}
	}
	return b.String()
}
