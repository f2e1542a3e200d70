package gitlabfake

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"slices"
	"strings"
)

// GitLab hands a job only to a runner that advertises the features the job
// needs (Ci::Build::RUNNER_FEATURES, checked by Ci::RegisterJobService):
// a job the picking runner cannot run is dropped as failed with
// runner_unsupported, and the runner is offered the next one. The fake
// does the same, with the same conditions:
//
//   - upload_multiple_artifacts: the job has artifacts:reports;
//   - refspecs: it runs for a merge request ref;
//   - artifacts_exclude: it has artifacts:exclude;
//   - multi_build_steps: it has a step other than script and after_script
//     (release:);
//   - fallback_cache_keys: a cache: entry has fallback_keys.

// ReasonRunnerUnsupported is the failure reason of a job dropped because
// the runner lacks a feature it needs.
const ReasonRunnerUnsupported = "runner_unsupported"

// requiredFeatures lists what the job needs of the runner.
func (j *Job) requiredFeatures() []string {
	var need []string
	add := func(f string) {
		if !slices.Contains(need, f) {
			need = append(need, f)
		}
	}
	for _, a := range j.spec.Artifacts {
		if a.Type != "" && a.Type != "archive" {
			add("upload_multiple_artifacts")
		}
		if len(a.Exclude) > 0 {
			add("artifacts_exclude")
		}
	}
	for _, r := range j.spec.Refspecs {
		if strings.Contains(r, "refs/merge-requests/") {
			add("refspecs")
		}
	}
	if len(j.spec.Steps) > 0 {
		add("multi_build_steps")
	}
	for _, c := range j.spec.Cache {
		if len(c.FallbackKeys) > 0 {
			add("fallback_cache_keys")
		}
	}
	return need
}

// missingFeatures returns the features the job needs that the runner's
// info.features does not set.
func (j *Job) missingFeatures(info json.RawMessage) []string {
	var i struct {
		Features map[string]bool `json:"features"`
	}
	_ = json.Unmarshal(info, &i)
	var missing []string
	for _, f := range j.requiredFeatures() {
		if !i.Features[f] {
			missing = append(missing, f)
		}
	}
	return missing
}

// Missing returns the features the runner lacked when the fake dropped the
// job as runner_unsupported; nil otherwise.
func (j *Job) Missing() []string {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return append([]string(nil), j.missing...)
}

// dotenvLocked returns the variables of the dotenv reports of the jobs j
// depends on, as GitLab injects them (artifacts:reports:dotenv, a gzip
// of KEY=VALUE lines); f.mu held.
func (j *Job) dotenvLocked() []map[string]any {
	var out []map[string]any
	for _, id := range j.spec.Dependencies {
		d := j.f.jobs[id]
		if d == nil {
			continue
		}
		for _, up := range d.uploads {
			if up.Type != "dotenv" {
				continue
			}
			for k, v := range parseDotenv(up.Data) {
				out = append(out, map[string]any{"key": k, "value": v, "public": false, "masked": false, "file": false, "raw": false})
			}
		}
	}
	slices.SortFunc(out, func(a, b map[string]any) int { return strings.Compare(a["key"].(string), b["key"].(string)) })
	return out
}

// parseDotenv reads a gzip (or plain) dotenv file: KEY=VALUE per line,
// values optionally quoted, comments and blank lines skipped.
func parseDotenv(data []byte) map[string]string {
	var r io.Reader = bytes.NewReader(data)
	if zr, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
		r = zr
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		vars[strings.TrimSpace(k)] = v
	}
	return vars
}
