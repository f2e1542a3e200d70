package gitlab

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/berth-ci/berth/jobsource"
)

// The scripts built here run in a plain POSIX shell on the instance, which is
// all the manager promises. Each one writes the real job script to a private
// temp dir and runs it with bash when the instance has bash (GitLab users
// write bash), else with sh. Variables are exported by the script itself
// rather than through Spec.Env because SSH servers commonly refuse to set
// client-supplied environment variables.

// shellQuote quotes s for POSIX shells: it wraps s in single quotes and writes each single quote inside as: close quote, backslash and quote, reopen quote.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var unsafePathChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// projectPath derives "group/project" from the repository URL, for a build
// directory users recognise; every segment is sanitised so it cannot escape
// the builds dir.
func projectPath(p *jobPayload) string {
	var segs []string
	if u, err := url.Parse(p.GitInfo.RepoURL); err == nil {
		for _, s := range strings.Split(strings.TrimSuffix(u.Path, ".git"), "/") {
			s = unsafePathChars.ReplaceAllString(s, "_")
			if s != "" && s != "." && s != ".." {
				segs = append(segs, s)
			}
		}
	}
	if len(segs) > 2 {
		segs = segs[len(segs)-2:]
	}
	if len(segs) == 0 {
		return "project-" + strconv.FormatInt(p.JobInfo.ProjectID, 10)
	}
	return strings.Join(segs, "/")
}

// repoAccess splits GitLab's repo_url, which embeds the job token as
// gitlab-ci-token:TOKEN@, into a clean URL (safe to print and to keep in
// .git/config) and the HTTP header that authenticates the fetch.
func repoAccess(p *jobPayload) (clean, authHeader string) {
	u, err := url.Parse(p.GitInfo.RepoURL)
	if err != nil {
		return p.GitInfo.RepoURL, ""
	}
	user, pass := "gitlab-ci-token", p.Token
	if u.User != nil {
		if n := u.User.Username(); n != "" {
			user = n
		}
		if pw, ok := u.User.Password(); ok {
			pass = pw
		}
		u.User = nil
	}
	clean = u.String()
	if u.Scheme == "http" || u.Scheme == "https" {
		authHeader = "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	return clean, authHeader
}

// stepScript returns the lines of the named step.
func stepScript(p *jobPayload, name string) (jobStep, bool) {
	for _, s := range p.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return jobStep{}, false
}

// buildSpec turns a GitLab job into what the manager runs. The sources,
// caches and dependencies' artifacts are in place before the script starts
// (Prepare, stage.go), so the script only enters the project dir.
func buildSpec(p *jobPayload, vars jobVars, buildsDir, projectRel, tmpName string) jobsource.Spec {
	script, _ := stepScript(p, "script")
	after, hasAfter := stepScript(p, "after_script")
	prelude := scriptPrelude(vars, projectRel, credentialsConfig(p))

	var main strings.Builder
	main.WriteString(prelude)
	// Record how the script ended for after_script's CI_JOB_STATUS; a job
	// killed before the trap runs is reported as canceled.
	main.WriteString(`trap 'berth_rc=$?; if [ "$berth_rc" -eq 0 ]; then berth_st=success; else berth_st=failed; fi; printf %s "$berth_st" > "$berth_tmp/status"; printf '"'"'section_end:%s:step_script\r\033[0K\n'"'"' "$(date +%s)"' EXIT` + "\n")
	main.WriteString(`mkdir -p "$berth_project"` + "\n")
	main.WriteString(`cd "$berth_project"` + "\n")
	main.WriteString(sectionLine("start", "step_script", "Executing \"step_script\" stage of the job script"))
	debug := debugTrace(vars)
	main.WriteString(debug)
	writeCommands(&main, script.Script)

	var post strings.Builder
	post.WriteString(prelude)
	// after_script runs even when the script failed or was canceled; it also
	// removes the job's temp files (file variables hold secrets) whatever happens.
	// The build dir stays for the artifacts and caches Collect takes from
	// it; Collect removes it (stage.go).
	post.WriteString(`trap 'cd /; rm -rf "$berth_tmp"' EXIT` + "\n")
	if hasAfter && len(after.Script) > 0 {
		post.WriteString(`trap 'cd /; rm -rf "$berth_tmp"; printf '"'"'section_end:%s:after_script\r\033[0K\n'"'"' "$(date +%s)"' EXIT` + "\n")
	}
	post.WriteString(`CI_JOB_STATUS=$(cat "$berth_tmp/status" 2>/dev/null || echo canceled); export CI_JOB_STATUS` + "\n")
	post.WriteString(`cd "$berth_project" 2>/dev/null || cd "$berth_tmp"` + "\n")
	if hasAfter && len(after.Script) > 0 {
		post.WriteString(sectionLine("start", "after_script", "Running after_script"))
		post.WriteString(debug)
		writeCommands(&post, after.Script)
	}

	spec := jobsource.Spec{
		Script:  launcher(buildsDir, tmpName, main.String()),
		Timeout: jobTimeout(p),
	}
	if hasAfter && len(after.Script) > 0 {
		// Without after_script nothing runs after the script: its temp
		// dir (file variables) goes with the builds dir in Collect, and an
		// image job does not start its image a second time.
		spec.AfterScript = launcher(buildsDir, tmpName, post.String())
		spec.AfterScriptTimeout = afterScriptTimeout(vars)
	}
	spec.Image, spec.Services = payloadImage(p, vars)
	if spec.Image != nil && buildsDir != "" {
		// The default builds dir lies in the instance's working directory,
		// which the job's root always gets; a configured one is bound too.
		spec.Image.Binds = []string{buildsDir}
	}
	return spec
}

// debugTrace is what CI_DEBUG_TRACE=true adds before a step's commands:
// the shell prints each command as it runs, as gitlab-runner's bash shell
// does, after a warning; the log's masking still applies.
func debugTrace(vars jobVars) string {
	if v := lastValue(vars, "CI_DEBUG_TRACE"); v != "true" && v != "1" {
		return ""
	}
	return "printf '\\033[0;33mWARNING: CI_DEBUG_TRACE is set: the log shows each command as it runs, variables expanded (masked values stay masked)\\033[0;m\\n'\nset -x\n"
}

// afterScriptTimeout is RUNNER_AFTER_SCRIPT_TIMEOUT (a Go duration, as
// gitlab-runner reads it); 0, the manager's default of 5 minutes, when
// unset or not a positive duration.
func afterScriptTimeout(vars jobVars) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(lastValue(vars, "RUNNER_AFTER_SCRIPT_TIMEOUT")))
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// jobTimeout is the job's timeout: runner_info's, else its script step's.
func jobTimeout(p *jobPayload) time.Duration {
	if t := time.Duration(p.RunnerInfo.Timeout) * time.Second; t > 0 {
		return t
	}
	script, _ := stepScript(p, "script")
	return time.Duration(script.Timeout) * time.Second
}

// scriptPrelude sets the shell options, the job's temp dir ($1), the
// builds dir ($2), the project dir and the variables, in that order, for
// both the script and after_script, then loads what earlier steps wrote to
// GITLAB_ENV, as gitlab-runner does before each step. creds is the git
// config the checkout includes (sources.go credentialsFile): it exists
// while a step runs, and after_script's end removes it with the temp dir.
func scriptPrelude(vars jobVars, projectRel, creds string) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	b.WriteString(`if [ -n "${BASH_VERSION:-}" ]; then set -o pipefail; fi` + "\n")
	b.WriteString(`berth_tmp=$1` + "\n")
	b.WriteString(`berth_builds=$2` + "\n")
	b.WriteString(`berth_project="$berth_builds/"` + shellQuote(projectRel) + "\n")
	writeExports(&b, vars, "berth_builds")
	if creds != "" {
		b.WriteString("(umask 077 && printf '%s' " + shellQuote(creds) + ` > "$berth_tmp/` + credentialsName + `")` + "\n")
	}
	b.WriteString(`touch "$berth_tmp/` + gitlabEnvFile + `"` + "\n")
	b.WriteString(`while IFS= read -r berth_line; do case $berth_line in [A-Za-z_]*=*) export "$berth_line";; esac; done < "$berth_tmp/` + gitlabEnvFile + `"` + "\n")
	return b.String()
}

// writeExports exports vars in order, so a later definition wins; a file
// variable's content goes to its file in the job's temp dir and the
// variable holds the path. buildsVar is the shell variable holding the
// builds dir.
func writeExports(b *strings.Builder, vars jobVars, buildsVar string) {
	for _, v := range vars {
		if !validName(v.Key) {
			// Not a shell name, so it cannot be exported; gitlab-runner
			// skips such variables too.
			continue
		}
		if v.File {
			path := `"$berth_tmp/` + v.Key + `"`
			b.WriteString("printf '%s' " + shellValue(v.Value, buildsVar) + " > " + path + "\n")
			b.WriteString("export " + v.Key + "=" + path + "\n")
			continue
		}
		b.WriteString("export " + v.Key + "=" + shellValue(v.Value, buildsVar) + "\n")
	}
}

var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func validName(s string) bool { return shellName.MatchString(s) }

// buildsDirShell is the builds dir as a shell word: the configured one, or
// builds/ in the directory commands start in on the instance (the login
// user's home), which an image job's root gets bound at the same path, so
// the job in its image, the fetch and the artifact collection outside it
// all see one directory.
func buildsDirShell(buildsDir string) string {
	if buildsDir != "" {
		return shellQuote(buildsDir)
	}
	return `"$(pwd -P)/builds"`
}

func shortSha(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// writeCommands echoes each command in green as "$ cmd", the way GitLab
// shows them, then runs it; set -e stops at the first failure.
func writeCommands(b *strings.Builder, lines []string) {
	for _, line := range lines {
		shown := line
		if first, _, multi := strings.Cut(strings.TrimRight(line, "\n"), "\n"); multi {
			shown = first + " # collapsed multi-line command"
		}
		b.WriteString(`printf '\033[32;1m$ %s\033[0;m\n' ` + shellQuote(shown) + "\n")
		b.WriteString(line + "\n")
	}
}

// launcher wraps body so that it runs under bash when available, with the
// job's private temp dir as $1. The temp dir name is fixed per job so the
// script and after_script share it (file variables, the status file).
func launcher(buildsDir, tmpName, body string) string {
	delim := "BERTH_EOF_" + randomString(16)
	for strings.Contains(body, delim) {
		delim = "BERTH_EOF_" + randomString(16)
	}
	var b strings.Builder
	b.WriteString("set -e\n")
	// The temp dir lies in the builds dir, which the script and
	// after_script share even when each runs in a fresh root of the job's
	// image.
	b.WriteString("berth_builds=" + buildsDirShell(buildsDir) + "\n")
	b.WriteString(`berth_tmp="$berth_builds/.` + tmpName + `"` + "\n")
	b.WriteString(`mkdir -p "$berth_tmp"` + "\n")
	b.WriteString(`chmod 700 "$berth_tmp"` + "\n")
	b.WriteString(`berth_script="$berth_tmp/script-$$.sh"` + "\n")
	b.WriteString(`cat > "$berth_script" <<'` + delim + "'\n")
	b.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteString("\n")
	}
	b.WriteString(delim + "\n")
	b.WriteString(`if command -v bash >/dev/null 2>&1; then exec bash "$berth_script" "$berth_tmp" "$berth_builds"; fi` + "\n")
	b.WriteString(`exec sh "$berth_script" "$berth_tmp" "$berth_builds"` + "\n")
	return b.String()
}
