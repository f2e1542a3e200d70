package gitlab

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/berth-ci/berth/artifacts"
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
// project dir, as the scripts do.
func (j *Job) buildDirs(ctx context.Context, f jobsource.Files) (builds, project string, err error) {
	if j.dirs[0] != "" {
		return j.dirs[0], j.dirs[1], nil
	}
	builds = j.src.cfg.BuildsDir
	if builds == "" {
		var out bytes.Buffer
		code, stderr, err := f.Stream(ctx, `printf '%s' "${HOME:-/tmp}/builds"`, nil, &out)
		if err != nil {
			return "", "", err
		}
		if code != 0 || !path.IsAbs(out.String()) {
			return "", "", fmt.Errorf("find the builds dir on the instance: exit %d %s", code, stderr)
		}
		builds = out.String()
	}
	project = path.Join(builds, strconv.FormatInt(j.p.ID, 10), projectPath(j.p))
	j.dirs = [2]string{builds, project}
	return builds, project, nil
}

// stagingDir is where Prepare unpacks caches and artifacts; the script lays
// it over the checkout (spec.go).
func (j *Job) stagingDir() string {
	return path.Join(j.dirs[0], strconv.FormatInt(j.p.ID, 10)+".staged")
}

// Prepare restores caches and downloads the artifacts of the job's
// dependencies into its project dir, before the script. A dependency whose
// artifacts cannot be had fails the job, as in gitlab-runner; a cache that
// cannot be had does not.
func (j *Job) Prepare(ctx context.Context, f jobsource.Files) error {
	if err := j.unsupported(); err != nil {
		j.writeLine("ERROR: " + err.Error())
		return err
	}
	if len(j.p.Cache) == 0 && len(j.p.Dependencies) == 0 && len(j.p.Artifacts) == 0 {
		return nil
	}
	_, project, err := j.buildDirs(ctx, f)
	if err != nil {
		return err
	}
	if err := j.checkPatterns(project); err != nil {
		j.writeLine("ERROR: " + err.Error())
		return err
	}
	staged := j.stagingDir()
	for _, c := range j.p.Cache {
		j.restoreCache(ctx, f, c, staged)
	}
	for _, d := range j.p.Dependencies {
		if d.ArtifactsFile.Filename == "" {
			continue // the dependency made no artifacts archive
		}
		if err := j.fetchDependency(ctx, f, d, staged); err != nil {
			j.writeLine("ERROR: Downloading artifacts for " + d.Name + " (" + strconv.FormatInt(d.ID, 10) + ") failed: " + err.Error())
			return fmt.Errorf("downloading the artifacts of job %d (%s) failed: %w", d.ID, d.Name, err)
		}
	}
	return nil
}

func (j *Job) fetchDependency(ctx context.Context, f jobsource.Files, d jobDependency, project string) error {
	j.writeLine(fmt.Sprintf("Downloading artifacts for %s (%d)...", d.Name, d.ID))
	file, size, err := j.downloadArtifacts(ctx, d)
	if err != nil {
		return err
	}
	defer file.Close()
	st, err := artifacts.Unpack(ctx, shell{f}, project, file, size)
	if err != nil {
		return err
	}
	j.writeLine(fmt.Sprintf("Downloading artifacts from coordinator... ok        id=%d responseStatus=200 OK files=%d", d.ID, st.Files))
	return nil
}

// Collect saves caches and uploads artifacts after after_script, then
// removes the build dir. An artifact that cannot be uploaded fails the job
// with the reason in its log.
func (j *Job) Collect(ctx context.Context, f jobsource.Files, r jobsource.Result) jobsource.Result {
	if len(j.p.Cache) == 0 && len(j.p.Artifacts) == 0 && j.dirs[0] == "" {
		return j.cleanup(ctx, f, r)
	}
	_, project, err := j.buildDirs(ctx, f)
	if err != nil {
		j.writeLine("WARNING: cannot reach the build dir for caches and artifacts: " + err.Error())
		return r
	}
	ok := r.Failure == jobsource.FailureNone
	for _, c := range j.p.Cache {
		if whenMatches(c.When, ok) {
			j.saveCache(ctx, f, c, project)
		}
	}
	var failed []string
	for _, a := range j.p.Artifacts {
		if !whenMatches(a.When, ok) {
			continue
		}
		if err := j.collectArtifact(ctx, f, a, project, ok); err != nil {
			j.writeLine(fmt.Sprintf("ERROR: Uploading artifacts as %q to coordinator... failed: %v", a.Type, err))
			failed = append(failed, fmt.Sprintf("%s: %v", a.Type, err))
		}
	}
	if len(failed) > 0 && ok {
		r.ExitCode, r.Failure = -1, jobsource.FailureSystem
		r.Message = "uploading artifacts failed: " + strings.Join(failed, "; ")
	}
	return j.cleanup(ctx, f, r)
}

// cleanup removes the job's build dir (its sources, artifacts and caches).
func (j *Job) cleanup(ctx context.Context, f jobsource.Files, r jobsource.Result) jobsource.Result {
	builds, _, err := j.buildDirs(ctx, f)
	if err == nil {
		_, _, _ = f.Stream(ctx, "rm -rf "+shellQuote(path.Join(builds, strconv.FormatInt(j.p.ID, 10)))+" "+shellQuote(j.stagingDir()), nil, nil)
	}
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

func (j *Job) collectArtifact(ctx context.Context, f jobsource.Files, a jobArtifact, project string, ok bool) error {
	if a.Type == "" {
		a.Type = "archive"
	}
	if a.Format == "" {
		a.Format = "zip"
	}
	if a.Format != string(artifacts.Zip) && a.Format != string(artifacts.Gzip) {
		return fmt.Errorf("%w: artifact format %q is not one berth can make (zip, gzip)", errNoRetry, a.Format)
	}
	if a.Type == "archive" {
		if ok {
			j.writeLine("Uploading artifacts for successful job")
		} else {
			j.writeLine("Uploading artifacts for failed job")
		}
	}
	paths, err := artifacts.Pick(ctx, shell{f}, project, artifacts.Spec{Paths: a.Paths, Exclude: a.Exclude, Untracked: a.Untracked})
	if err != nil {
		return err
	}
	for _, p := range a.Paths {
		j.writeLine(fmt.Sprintf("%s: found %d matching artifact files and directories", p, countUnder(paths, p)))
	}
	if len(paths) == 0 {
		j.writeLine("WARNING: No files to upload")
		return nil
	}
	var buf bytes.Buffer
	if _, err := artifacts.Pack(ctx, shell{f}, project, paths, artifacts.Format(a.Format), &buf); err != nil {
		return err
	}
	name := a.Name
	if name == "" {
		name = "artifacts"
	}
	filename := name + ".zip"
	if a.Format == string(artifacts.Gzip) {
		filename = a.Type + ".gz"
	}
	if err := j.uploadArtifact(ctx, a, filename, buf.Bytes()); err != nil {
		return err
	}
	j.writeLine(fmt.Sprintf("Uploading artifacts as %q to coordinator... 201 Created  id=%d responseStatus=201 Created", a.Format, j.p.ID))
	return nil
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
// fails at once rather than report a success it did not earn.
func (j *Job) unsupported() error {
	for _, st := range j.p.Steps {
		if st.Name != "script" && st.Name != "after_script" {
			return fmt.Errorf("the job has a %q step (from %s: in .gitlab-ci.yml), which berth cannot run: berth runs script and after_script only; do the work in script: (e.g. release-cli create for release:)", st.Name, st.Name)
		}
	}
	for _, a := range j.p.Artifacts {
		if a.Format != "" && a.Format != string(artifacts.Zip) && a.Format != string(artifacts.Gzip) {
			return fmt.Errorf("artifact %q wants the %q format, which berth cannot make (zip and gzip only)", a.Type, a.Format)
		}
	}
	return nil
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
