package gitlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/berth-ci/berth/artifacts"
	"github.com/berth-ci/berth/internal/bytesize"
	"github.com/berth-ci/berth/jobsource"
)

// The stages gitlab-runner runs around a job's script, berth-side: restore
// the cache and download the dependencies' artifacts before it; save the
// cache and upload the artifacts after after_script. Files move over the
// executor's SSH connection (jobsource.Files); archives are built and read
// by berth (package artifacts), so the instance needs only find and tar.

var _ jobsource.Stager = (*Job)(nil)

// shell adapts jobsource.Files to artifacts.Shell.
type shell struct{ jobsource.Files }

// buildDirs resolves, on the instance, the builds dir and the job's
// project dir, as the scripts do (buildsDirShell).
func (j *Job) buildDirs(ctx context.Context, f jobsource.Files) (builds, project string, err error) {
	if j.dirs[0] != "" {
		return j.dirs[0], j.dirs[1], nil
	}
	builds = j.set.BuildsDir
	if builds == "" {
		var out bytes.Buffer
		code, stderr, err := f.Stream(ctx, `printf '%s' `+buildsDirShell(""), nil, &out)
		if err != nil {
			return "", "", err
		}
		if code != 0 || !path.IsAbs(out.String()) {
			return "", "", fmt.Errorf("find the builds dir on the instance: exit %d %s", code, stderr)
		}
		builds = out.String()
	}
	project = path.Join(builds, j.projectRel())
	resolvePayloadMarks(j.p, builds)
	j.dirs = [2]string{builds, project}
	return builds, project, nil
}

// Prepare gets the job's sources, restores its caches and downloads the
// artifacts of its dependencies into its project dir, before the script,
// in that order (as GitLab Runner: artifacts and caches win over tracked
// files). A failure says why in the log and, through Finish, to GitLab.
func (j *Job) Prepare(ctx context.Context, f jobsource.Files) error {
	err := j.prepare(ctx, f)
	if err == nil {
		return nil
	}
	pe, ok := err.(*prepareError)
	if !ok {
		pe = &prepareError{reason: reasonSystem, msg: err.Error()}
	}
	// Said once, in the log's last line (Finish), with GitLab's reason.
	j.failed.Store(pe)
	return pe
}

func (j *Job) prepare(ctx context.Context, f jobsource.Files) error {
	if err := j.prepareDirs(ctx, f); err != nil {
		return err
	}
	return j.openToImageUser(ctx, f)
}

// openToImageUser lets a job that runs as another user of its image
// (image: docker: user) write its builds dir, as GitLab Runner's docker
// executor does by fetching and extracting under umask 0000: the project
// dir and what is in it, and each directory from the builds dir down to
// it, become writable by all.
func (j *Job) openToImageUser(ctx context.Context, f jobsource.Files) error {
	if j.spec.Image == nil || j.spec.Image.User == "" {
		return nil
	}
	builds, project, err := j.buildDirs(ctx, f)
	if err != nil {
		return err
	}
	script := `b=$1 p=$2; mkdir -p "$p" && chmod -R a+rwX "$p" && d=$(dirname "$p") && ` +
		`while [ "$d" != "$b" ] && [ "$d" != / ]; do chmod a+rwx "$d"; d=$(dirname "$d"); done && chmod a+rwx "$b"`
	code, stderr, err := f.Stream(ctx, "sh -c "+shellQuote(script)+" sh "+shellQuote(builds)+" "+shellQuote(project), nil, io.Discard)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("open the builds dir to the image's user %q: exit %d %s", j.spec.Image.User, code, stderr)
	}
	return nil
}

func (j *Job) prepareDirs(ctx context.Context, f jobsource.Files) error {
	for _, err := range []error{j.gitErr, j.pullErr} {
		if err != nil {
			return &prepareError{reason: reasonConfiguration, msg: err.Error()}
		}
	}
	if j.spec.Image == nil && j.set.RefuseShellJobs {
		return &prepareError{reason: reasonConfiguration, msg: "the job names no image and would run in the instance's shell, " +
			"outside [images] allowed_images: give the job an image: from allowed_images, set image in the [[source]] of berth.toml " +
			"(the default image, as gitlab-runner's [runners.docker] image), or set allow_shell_jobs = true there to allow shell jobs"}
	}
	if err := j.unsupported(); err != nil {
		return &prepareError{reason: reasonUnsupported, msg: err.Error()}
	}
	builds, project, err := j.buildDirs(ctx, f)
	if err != nil {
		return err
	}
	if err := j.checkPatterns(project); err != nil {
		return &prepareError{reason: reasonConfiguration, msg: err.Error()}
	}
	if err := j.getSources(ctx, f, builds, project); err != nil {
		return err
	}
	if len(j.p.Cache) > 0 {
		j.sectionStart("restore_cache", "Restoring cache")
		for _, w := range j.cacheWarnings {
			j.writeLine("\033[0;33mWARNING: " + w + "\033[0;m")
		}
		for _, c := range j.p.Cache {
			j.restoreCache(ctx, f, c, project)
		}
		j.sectionEnd("restore_cache")
	}
	var deps []jobDependency
	for _, d := range j.p.Dependencies {
		if d.ArtifactsFile.Filename != "" { // else the dependency made no archive
			deps = append(deps, d)
		}
	}
	if len(deps) == 0 {
		return nil
	}
	j.sectionStart("download_artifacts", "Downloading artifacts")
	defer j.sectionEnd("download_artifacts")
	for _, d := range deps {
		if err := j.fetchDependency(ctx, f, d, project); err != nil {
			reason := reasonSystem
			if errors.Is(err, errNoRetry) {
				reason = reasonMissingDependency
			}
			return &prepareError{reason: reason, msg: fmt.Sprintf("downloading the artifacts of job %d (%s) failed: %v", d.ID, d.Name, err)}
		}
	}
	return nil
}

func (j *Job) fetchDependency(ctx context.Context, f jobsource.Files, d jobDependency, project string) error {
	j.writeLine(fmt.Sprintf("Downloading artifacts for %s (%d)...", d.Name, d.ID))
	var (
		st  artifacts.Stats
		err error
	)
	for attempt := 1; attempt <= j.git.attempts.artifacts; attempt++ {
		if attempt > 1 {
			j.writeLine(fmt.Sprintf("WARNING: %v; trying again (attempt %d of %d, ARTIFACT_DOWNLOAD_ATTEMPTS)", err, attempt, j.git.attempts.artifacts))
		}
		if st, err = j.fetchDependencyOnce(ctx, f, d, project); err == nil || errors.Is(err, errNoRetry) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	j.writeLine(fmt.Sprintf("Downloading artifacts from coordinator... ok        id=%d responseStatus=200 OK files=%d", d.ID, st.Files))
	return nil
}

func (j *Job) fetchDependencyOnce(ctx context.Context, f jobsource.Files, d jobDependency, project string) (artifacts.Stats, error) {
	file, size, err := j.downloadArtifacts(ctx, d)
	if err != nil {
		return artifacts.Stats{}, err
	}
	defer file.Close()
	return artifacts.Unpack(ctx, shell{f}, project, file, size)
}

// Collect saves caches and uploads artifacts after after_script, from the
// project dir the script ran in, then removes the build dir. An artifact
// that cannot be uploaded fails the job with the reason in its log; paths
// that match nothing are a warning, as in GitLab Runner.
func (j *Job) Collect(ctx context.Context, f jobsource.Files, r jobsource.Result) jobsource.Result {
	if len(j.p.Cache) == 0 && len(j.p.Artifacts) == 0 && j.dirs[0] == "" {
		return j.cleanup(ctx, f, r)
	}
	_, project, err := j.buildDirs(ctx, f)
	if err != nil {
		j.writeLine("WARNING: cannot reach the build dir for caches and artifacts: " + err.Error())
		return r
	}
	if j.failed.Load() != nil {
		// The job never got its sources: nothing of it to keep.
		return j.cleanup(ctx, f, r)
	}
	ok := r.Failure == jobsource.FailureNone
	var caches []jobCache
	for _, c := range j.p.Cache {
		if whenMatches(c.When, ok) && c.Policy != "pull" {
			caches = append(caches, c)
		}
	}
	if len(caches) > 0 {
		j.sectionStart("archive_cache", "Saving cache for "+map[bool]string{true: "successful", false: "failed"}[ok]+" job")
		for _, c := range caches {
			j.saveCache(ctx, f, c, project)
		}
		j.sectionEnd("archive_cache")
	}
	var arts []jobArtifact
	for _, a := range j.p.Artifacts {
		if whenMatches(a.When, ok) {
			arts = append(arts, a)
		}
	}
	var failed []string
	tooLarge := false
	if len(arts) > 0 {
		j.sectionStart("upload_artifacts_on_"+map[bool]string{true: "success", false: "failure"}[ok],
			"Uploading artifacts for "+map[bool]string{true: "successful", false: "failed"}[ok]+" job")
		for _, a := range arts {
			if err := j.collectArtifact(ctx, f, a, project); err != nil {
				j.writeLine(fmt.Sprintf("\033[31;1mERROR: Uploading artifacts as %q to coordinator... failed: %v\033[0;m", a.Type, err))
				failed = append(failed, fmt.Sprintf("%s: %v", a.Type, err))
				tooLarge = tooLarge || errors.Is(err, errArtifactTooLarge)
			}
		}
		j.sectionEnd("upload_artifacts_on_" + map[bool]string{true: "success", false: "failure"}[ok])
	}
	if len(failed) > 0 && ok {
		r.ExitCode, r.Failure = -1, jobsource.FailureSystem
		if tooLarge {
			r.Failure = jobsource.FailureScript
		}
		r.Message = "uploading artifacts failed: " + strings.Join(failed, "; ")
	}
	return j.cleanup(ctx, f, r)
}

// cleanup removes the job's build dir (its sources, artifacts and caches)
// and its temp dir. A GIT_CLONE_PATH checkout with GIT_STRATEGY fetch is
// kept, for the next job on the instance to fetch into.
func (j *Job) cleanup(ctx context.Context, f jobsource.Files, r jobsource.Result) jobsource.Result {
	builds, project, err := j.buildDirs(ctx, f)
	if err != nil {
		return r
	}
	rm := "rm -rf " + shellQuote(path.Join(builds, strconv.FormatInt(j.p.ID, 10))) + " " + shellQuote(path.Join(builds, "."+j.tmpName))
	if j.git.clonePath != "" && j.git.strategy != "fetch" {
		rm += " " + shellQuote(project)
	}
	_, _, _ = f.Stream(ctx, rm, nil, nil)
	return r
}

// whenMatches applies artifacts:when / cache:when (on_success by default).
func whenMatches(when string, ok bool) bool {
	switch when {
	case "always":
		return true
	case "on_failure":
		return !ok
	default:
		return ok
	}
}

// collectArtifact packs and uploads one artifacts entry: the archive (zip)
// or a report (gzip, or raw: the one file as it is).
func (j *Job) collectArtifact(ctx context.Context, f jobsource.Files, a jobArtifact, project string) error {
	if a.Type == "" {
		a.Type = "archive"
	}
	if a.Format == "" {
		a.Format = "zip"
	}
	paths, err := artifacts.Pick(ctx, shell{f}, project, artifacts.Spec{Paths: a.Paths, Exclude: a.Exclude, Untracked: a.Untracked})
	if err != nil {
		return err
	}
	for _, p := range a.Paths {
		if n := countUnder(paths, p); n > 0 {
			j.writeLine(fmt.Sprintf("%s: found %d matching artifact files and directories", p, n))
		} else {
			j.writeLine(fmt.Sprintf("\033[0;33mWARNING: %s: no matching files. Ensure that the artifact path is relative to the working directory (%s)\033[0;m", p, project))
		}
	}
	if len(paths) == 0 {
		j.writeLine("\033[31;1mERROR: No files to upload\033[0;m")
		return nil
	}
	// The archive goes to an unlinked temp file (gone when closed, crash or
	// not), not to memory: an archive may be gigabytes.
	tmp, err := os.CreateTemp(j.src.cfg.TempDir, "artifact-*")
	if err != nil {
		return fmt.Errorf("a temp file for the archive (in %s): %w", j.src.cfg.TempDir, err)
	}
	_ = os.Remove(tmp.Name())
	defer tmp.Close()
	lw := &limitWriter{w: tmp, limit: j.set.MaxArtifactSize}
	st, err := artifacts.Pack(ctx, shell{f}, project, paths, artifacts.Format(a.Format), lw)
	if lw.over {
		return fmt.Errorf("%w: the archive of %d files and directories is larger than this runner's max_artifact_size of %s "+
			"(packing stopped there, nothing was uploaded); keep fewer or smaller paths in artifacts:, or ask the berth operator to raise max_artifact_size",
			errArtifactTooLarge, len(paths), bytesize.Format(lw.limit))
	}
	if err != nil {
		return err
	}
	filename := a.Name
	switch a.Format {
	case string(artifacts.Gzip):
		filename = a.Type + ".gz"
	case string(artifacts.Raw):
		filename = st.Name
	default:
		if filename == "" {
			filename = "artifacts"
		}
		filename += ".zip"
	}
	if err := j.uploadArtifact(ctx, a, filename, tmp, lw.n); err != nil {
		return err
	}
	j.writeLine(fmt.Sprintf("Uploading artifacts as %q to coordinator... 201 Created  id=%d responseStatus=201 Created", a.Format, j.p.ID))
	return nil
}

// limitWriter writes to w until more than limit bytes (0: no limit) come,
// then fails every write; n counts what w took.
type limitWriter struct {
	w     io.Writer
	limit int64
	n     int64
	over  bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.limit > 0 && l.n+int64(len(p)) > l.limit {
		l.over = true
		return 0, errArtifactTooLarge
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}

// countUnder counts picked paths a pattern matched, for the log line
// gitlab-runner prints.
func countUnder(paths []string, pattern string) int {
	n := 0
	for _, p := range paths {
		if ok, _ := pathMatch(pattern, p); ok {
			n++
		}
	}
	return n
}

func pathMatch(pattern, p string) (bool, error) {
	pattern = strings.TrimPrefix(path.Clean(pattern), "./")
	if p == pattern || strings.HasPrefix(p, pattern+"/") {
		return true, nil
	}
	return path.Match(pattern, p)
}

// unsupported names what the job asks for that berth cannot do, so that it
// fails at once (runner_unsupported) rather than report a success it did
// not earn. GitLab sends none of these to a runner that advertises what
// berth does (api.go); an older GitLab might.
func (j *Job) unsupported() error {
	for _, st := range j.p.Steps {
		if st.Name != "script" && st.Name != "after_script" {
			return fmt.Errorf("the job has a %q step (from %s: in .gitlab-ci.yml), which berth does not run: berth runs script and after_script only; "+
				"do the work in script: (for release:, run release-cli or glab in script:)", st.Name, st.Name)
		}
	}
	for _, a := range j.p.Artifacts {
		switch artifacts.Format(a.Format) {
		case "", artifacts.Zip, artifacts.Gzip, artifacts.Raw:
		default:
			return fmt.Errorf("artifact %q wants the %q format, which berth cannot make (zip, gzip and raw)", a.Type, a.Format)
		}
	}
	return platformErr(j.p)
}

// checkPatterns refuses artifact and cache paths that leave the project dir
// before the script runs.
func (j *Job) checkPatterns(project string) error {
	check := func(what string, ps []string) error {
		for _, p := range ps {
			if _, err := artifacts.CleanPattern(p, project); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		return nil
	}
	for _, a := range j.p.Artifacts {
		if err := check("artifacts:paths", a.Paths); err != nil {
			return err
		}
		if err := check("artifacts:exclude", a.Exclude); err != nil {
			return err
		}
	}
	for _, c := range j.p.Cache {
		if err := check("cache:paths", c.Paths); err != nil {
			return err
		}
	}
	return nil
}
