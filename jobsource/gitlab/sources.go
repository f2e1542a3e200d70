package gitlab

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/berth-ci/berth/jobsource"
)

// berth fetches a job's sources itself, on the instance and outside the
// job's image, as GitLab Runner's docker executor does with its helper
// image: the job's image needs no git, and the checkout lands in the
// builds dir, which an image job sees at the same path (the instance's
// working directory, or a configured builds_dir, is bound into its root).
// The fetch runs the instance's git: on the local provider's sandboxes the
// host's (its /usr is bound read-only), on remote instances the one their
// image installs. The git variables behave as GitLab documents them
// (ci/runners/configure_runners.md, "Git strategy" and below).

// gitOptions are the job's GIT_* and *_ATTEMPTS variables.
type gitOptions struct {
	strategy   string // fetch, clone or none
	depth      int
	submodules string // none, normal or recursive
	subFlags   []string
	subPaths   []string // GIT_SUBMODULE_PATHS: the submodules to update; nil for all
	subDepth   int      // GIT_SUBMODULE_DEPTH; 0 for full history
	subHTTPS   bool     // GIT_SUBMODULE_FORCE_HTTPS
	checkout   bool
	fetchFlags []string
	cleanFlags []string // nil: no git clean
	clonePath  string   // relative to the builds dir; "" for the default
	attempts   struct{ sources, artifacts, cache int }
}

// gitOptionsOf reads the options from the job's expanded variables. A value
// GitLab would refuse is an error that names the variable.
func gitOptionsOf(p *jobPayload, vars []jobVariable) (gitOptions, error) {
	get := func(k string) string { return strings.TrimSpace(lastValue(vars, k)) }
	o := gitOptions{strategy: "clone", depth: p.GitInfo.Depth, submodules: "none", checkout: true}
	if p.AllowGitFetch {
		o.strategy = "fetch"
	}
	switch s := get("GIT_STRATEGY"); s {
	case "":
	case "fetch", "clone", "none":
		o.strategy = s
	case "empty":
		o.strategy = "none" // GitLab's "empty": a clean dir, no sources
	default:
		return o, fmt.Errorf("GIT_STRATEGY %q: use fetch, clone, none or empty", s)
	}
	if d := get("GIT_DEPTH"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return o, fmt.Errorf("GIT_DEPTH %q: use a whole number (0 fetches all history)", d)
		}
		o.depth = n
	}
	switch s := get("GIT_SUBMODULE_STRATEGY"); s {
	case "", "none":
	case "normal", "recursive":
		o.submodules = s
	default:
		return o, fmt.Errorf("GIT_SUBMODULE_STRATEGY %q: use none, normal or recursive", s)
	}
	o.subFlags = strings.Fields(get("GIT_SUBMODULE_UPDATE_FLAGS"))
	o.subPaths = strings.Fields(get("GIT_SUBMODULE_PATHS"))
	if d := get("GIT_SUBMODULE_DEPTH"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return o, fmt.Errorf("GIT_SUBMODULE_DEPTH %q: use a whole number (0 fetches all history)", d)
		}
		o.subDepth = n
	}
	o.subHTTPS = get("GIT_SUBMODULE_FORCE_HTTPS") == "true"
	if get("GIT_CHECKOUT") == "false" {
		o.checkout = false
	}
	o.fetchFlags = []string{"--prune", "--quiet"}
	if f := get("GIT_FETCH_EXTRA_FLAGS"); f == "none" {
		o.fetchFlags = nil
	} else if f != "" {
		o.fetchFlags = strings.Fields(f)
	}
	o.cleanFlags = []string{"-ffdx"}
	if f := get("GIT_CLEAN_FLAGS"); f == "none" {
		o.cleanFlags = nil
	} else if f != "" {
		o.cleanFlags = strings.Fields(f)
	}
	for _, a := range []struct {
		name string
		to   *int
	}{{"GET_SOURCES_ATTEMPTS", &o.attempts.sources}, {"ARTIFACT_DOWNLOAD_ATTEMPTS", &o.attempts.artifacts}, {"RESTORE_CACHE_ATTEMPTS", &o.attempts.cache}} {
		*a.to = 1
		if v := get(a.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 10 {
				return o, fmt.Errorf("%s %q: use a number from 1 to 10", a.name, v)
			}
			*a.to = n
		}
	}
	// Its $CI_BUILDS_DIR expanded to the mark (variables.go).
	if cp := lastValue(vars, "GIT_CLONE_PATH"); cp != "" {
		rel, err := clonePath(lastValue(p.Variables, "GIT_CLONE_PATH"), cp)
		if err != nil {
			return o, err
		}
		o.clonePath = rel
	}
	return o, nil
}

// clonePath returns GIT_CLONE_PATH, expanded, relative to the builds dir.
// GitLab requires the path to lie under $CI_BUILDS_DIR.
func clonePath(raw, expanded string) (string, error) {
	rest, ok := strings.CutPrefix(expanded, buildsDirMark)
	if !ok || !strings.HasPrefix(rest, "/") {
		return "", fmt.Errorf("GIT_CLONE_PATH %q must start with $CI_BUILDS_DIR/ (berth's builds dir differs from the docker executor's /builds)", raw)
	}
	rel := path.Clean(strings.TrimPrefix(rest, "/"))
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, buildsDirMark) {
		return "", fmt.Errorf("GIT_CLONE_PATH %q must name a directory below $CI_BUILDS_DIR", raw)
	}
	return rel, nil
}

// projectRel is the project dir relative to the builds dir.
func (j *Job) projectRel() string { return projectRel(j.p, j.git) }

func projectRel(p *jobPayload, o gitOptions) string {
	if o.clonePath != "" {
		return o.clonePath
	}
	return strconv.FormatInt(p.ID, 10) + "/" + projectPath(p)
}

// getSources fetches the sources into the project dir on the instance,
// trying GET_SOURCES_ATTEMPTS times.
func (j *Job) getSources(ctx context.Context, f jobsource.Files, builds, project string) error {
	j.sectionStart("get_sources", "Getting source from Git repository")
	defer j.sectionEnd("get_sources")
	for _, h := range j.p.Hooks {
		if len(h.Script) > 0 {
			// berth's fetch runs outside the job's image, where a job's
			// commands must not run; said rather than silently skipped.
			j.writeLine(fmt.Sprintf("\033[0;33mWARNING: hooks: %s is not run by berth (its fetch runs outside the job's image); "+
				"move those commands into before_script or script\033[0;m", h.Name))
		}
	}
	if j.git.strategy == "none" {
		j.writeLine("Skipping Git repository setup (GIT_STRATEGY: none)")
		_, _, err := f.Stream(ctx, "mkdir -p "+shellQuote(project), nil, nil)
		return err
	}
	script, input := j.fetchScript(builds, project)
	var err error
	for attempt := 1; attempt <= j.git.attempts.sources; attempt++ {
		if attempt > 1 {
			j.writeLine(fmt.Sprintf("WARNING: Getting sources failed: %v; trying again (attempt %d of %d, GET_SOURCES_ATTEMPTS)", err, attempt, j.git.attempts.sources))
		}
		var code int
		code, _, err = f.Stream(ctx, `script=$(cat) && exec </dev/null && eval "$script"`, strings.NewReader(input+script), j.Log())
		if err != nil {
			return err
		}
		if code == errNoGit {
			return &prepareError{reason: reasonConfiguration, msg: "git is not installed on the instance: berth fetches the sources there, outside the job's image " +
				"(the job's image needs no git); install git on the instance (its image, or the host for the local provider), or set GIT_STRATEGY: none"}
		}
		if code == 0 {
			return nil
		}
		err = fmt.Errorf("git exited %d", code)
	}
	return &prepareError{reason: reasonScript, msg: "getting the sources failed: " + err.Error()}
}

// gitSafe runs git with hooks and fsmonitor off; -c reaches the git
// processes it starts (submodules) through GIT_CONFIG_PARAMETERS.
const gitSafe = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false"

// errNoGit is the fetch script's exit code when git is missing.
const errNoGit = 42

// fetchScript returns the script that fetches the sources and what it
// reads first on stdin: the job's variables and the authentication
// header, which so stay off every command line on the instance.
func (j *Job) fetchScript(builds, project string) (script, input string) {
	clean, auth := repoAccess(j.p)
	g := j.p.GitInfo
	o := j.git
	refspecs := g.Refspecs
	if len(refspecs) == 0 && g.Ref != "" {
		if g.RefType == "tag" {
			refspecs = []string{"+refs/tags/" + g.Ref + ":refs/tags/" + g.Ref}
		} else {
			refspecs = []string{"+refs/heads/" + g.Ref + ":refs/remotes/origin/" + g.Ref}
		}
	}
	if len(refspecs) == 0 {
		refspecs = []string{g.Sha}
	}
	var in strings.Builder
	in.WriteString("berth_builds=" + shellQuote(builds) + "\n")
	for _, v := range j.vars {
		if validName(v.Key) && !v.File && (!strings.HasPrefix(v.Key, "GIT_CONFIG_") || v.Key == "GIT_CONFIG_GLOBAL") {
			in.WriteString("export " + v.Key + "=" + shellValue(v.Value, "berth_builds") + "\n")
		}
	}
	var cfg [][2]string
	if auth != "" {
		// Scoped to GitLab's URL, in git's environment rather than its
		// arguments: never in .git/config, never in a process list.
		cfg = append(cfg, [2]string{"http." + serverBase(clean) + ".extraHeader", auth})
	}
	if o.subHTTPS {
		// GIT_SUBMODULE_FORCE_HTTPS: submodules on GitLab's host given by
		// SSH URL are fetched over HTTPS, with the job token.
		if u, err := url.Parse(clean); err == nil && u.Hostname() != "" {
			base := serverBase(clean)
			cfg = append(cfg, [2]string{"url." + base + ".insteadOf", "git@" + u.Hostname() + ":"},
				[2]string{"url." + base + ".insteadOf", "ssh://git@" + u.Hostname() + "/"})
		}
	}
	if len(cfg) > 0 {
		in.WriteString("export GIT_CONFIG_COUNT=" + strconv.Itoa(len(cfg)))
		for i, kv := range cfg {
			in.WriteString(fmt.Sprintf(" GIT_CONFIG_KEY_%d=%s GIT_CONFIG_VALUE_%d=%s", i, shellQuote(kv[0]), i, shellQuote(kv[1])))
		}
		in.WriteString("\n")
	}

	var b strings.Builder
	line := func(s string) { b.WriteString(s + "\n") }
	echo := func(s string) { line("printf '%s\\n' " + shellQuote(s)) }
	line("set -e")
	line("exec 2>&1")
	line(fmt.Sprintf(`command -v git >/dev/null 2>&1 || { echo "ERROR: git is not installed on the instance"; exit %d; }`, errNoGit))
	d := shellQuote(project)
	if o.strategy == "clone" {
		line("rm -rf " + d)
	}
	if o.depth > 0 {
		echo(fmt.Sprintf("Fetching changes with git depth set to %d...", o.depth))
	} else {
		echo("Fetching changes...")
	}
	line("mkdir -p " + d + " && cd " + d)
	// What an earlier or concurrent job left in .git must run no code
	// here, outside the job's image and with the job token at hand: a
	// .git that is not a plain directory is removed, and so are the
	// hooks, the repository's config (core.hooksPath, core.fsmonitor,
	// core.sshCommand, filters, includes) and the submodules' git dirs;
	// every git below runs with hooks and fsmonitor off whatever config
	// appears meanwhile.
	line(`if [ -L .git ] || { [ -e .git ] && [ ! -d .git ]; }; then rm -rf .git; fi`)
	// The repository's object format (sha256 repositories), given to
	// the re-init too: its config, which said so, is gone.
	initCmd := gitSafe + " -c init.defaultBranch=main init -q"
	if f := g.RepoObjectFormat; f != "" && f != "sha1" {
		initCmd += " --object-format=" + shellQuote(f)
	}
	line(`if [ -d .git ]; then rm -rf .git/hooks .git/config .git/modules .git/info/attributes .git/index.lock .git/shallow.lock .git/HEAD.lock; ` +
		initCmd + ` . && echo "Reinitialized existing Git repository in $PWD/.git/"; ` +
		`else ` + initCmd + ` . && echo "Created fresh repository."; fi`)
	line(gitSafe + " remote add origin " + shellQuote(clean))
	if cred := credentialsFile(builds, j.tmpName); auth != "" {
		// The job's own git reaches the project's GitLab with the job
		// token while the job runs (scriptPrelude writes the file).
		line(gitSafe + " config --local include.path " + shellQuote(cred))
	}
	fetch := gitSafe + " fetch --no-tags"
	for _, f := range o.fetchFlags {
		fetch += " " + shellQuote(f)
	}
	if o.depth > 0 {
		fetch += " --depth " + strconv.Itoa(o.depth)
	}
	fetch += " origin"
	for _, r := range refspecs {
		fetch += " " + shellQuote(r)
	}
	line(fetch)
	if !o.checkout {
		echo("Skipping Git checkout (GIT_CHECKOUT: false)")
		echo("Skipping Git submodules setup")
		return b.String(), in.String()
	}
	echo(fmt.Sprintf("Checking out %s as detached HEAD (ref is %s)...", shortSha(g.Sha), g.Ref))
	line(gitSafe + " -c advice.detachedHead=false checkout -f -q " + shellQuote(g.Sha))
	if len(o.cleanFlags) > 0 {
		line(gitSafe + " clean " + quoteAll(o.cleanFlags))
	}
	switch o.submodules {
	case "none":
		echo("Skipping Git submodules setup")
	default:
		rec := ""
		if o.submodules == "recursive" {
			rec = " --recursive"
		}
		echo("Updating/initializing submodules" + strings.ReplaceAll(rec, " --", " ") + "...")
		paths := ""
		if len(o.subPaths) > 0 {
			// GitLab's GIT_SUBMODULE_PATHS: paths, or :(exclude) pathspecs.
			paths = " -- " + quoteAll(o.subPaths)
		}
		line(gitSafe + " submodule sync" + rec + paths)
		upd := gitSafe + " submodule update --init" + rec
		if o.subDepth > 0 {
			upd += " --depth " + strconv.Itoa(o.subDepth)
		}
		if len(o.subFlags) > 0 {
			upd += " " + quoteAll(o.subFlags)
		}
		line(upd + paths)
		if len(o.cleanFlags) > 0 {
			line(gitSafe + " submodule foreach" + rec + " git clean " + quoteAll(o.cleanFlags))
		}
	}
	return b.String(), in.String()
}

func quoteAll(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// serverBase is scheme://host/ of a repository URL, the scope of the
// authentication header (submodules on the same GitLab get it too, as with
// GitLab Runner).
func serverBase(repo string) string {
	u, err := url.Parse(repo)
	if err != nil {
		return repo
	}
	return u.Scheme + "://" + u.Host + "/"
}

// lastValue is the value of variable k; a later definition wins, as in
// GitLab's payload (job variables after project and group ones).
func lastValue(vars []jobVariable, k string) string {
	v := ""
	for _, x := range vars {
		if x.Key == k {
			v = x.Value
		}
	}
	return v
}

// credentialsFile is the git config file in the job's temp dir that gives
// the job's own git the job token for the project's GitLab; it goes with
// the temp dir when the job ends.
func credentialsFile(builds, tmpName string) string {
	return path.Join(builds, "."+tmpName, credentialsName)
}

// credentialsName is that file's name in the job's temp dir.
const credentialsName = "git-credentials.conf"

// credentialsConfig is that file's content: GitLab's URL rewritten to
// carry the job token, as gitlab-runner's insteadOf rule; "" when the
// repository is not reached over http(s).
func credentialsConfig(p *jobPayload) string {
	clean, auth := repoAccess(p)
	if auth == "" {
		return ""
	}
	u, err := url.Parse(serverBase(clean))
	if err != nil {
		return ""
	}
	u.User = url.UserPassword("gitlab-ci-token", p.Token)
	return "[url " + strconv.Quote(u.String()) + "]\n\tinsteadOf = " + serverBase(clean) + "\n"
}

// tokenHeaderSecret is the base64 credentials of the fetch's header, which
// a job printing its git configuration must not show either.
func tokenHeaderSecret(p *jobPayload) string {
	_, auth := repoAccess(p)
	return strings.TrimPrefix(auth, "Authorization: Basic ")
}
