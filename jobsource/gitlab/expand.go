package gitlab

import (
	"fmt"
	"slices"
	"strings"
)

// GitLab leaves some job keywords for the runner to expand with the job's
// variables: artifacts:name, paths and exclude; cache:key, paths, policy
// and fallback_keys; image and service names (GitLab's "Where variables
// can be used", runner column). expandPayload does it once, when the job
// arrives, so everything after sees the final values.
//
// It returns the warnings for the trace's restore_cache section.
func expandPayload(p *jobPayload, vars jobVars) (warnings []string) {
	ex := vars.expand
	all := func(ss []string) []string {
		out := make([]string, 0, len(ss))
		for _, s := range ss {
			if e := ex(s); e != "" {
				out = append(out, e)
			}
		}
		return out
	}
	for i := range p.Artifacts {
		a := &p.Artifacts[i]
		a.Name, a.Paths, a.Exclude = ex(a.Name), all(a.Paths), all(a.Exclude)
	}
	for i := range p.Cache {
		c := &p.Cache[i]
		c.Key, c.Paths, c.Policy, c.FallbackKeys = ex(c.Key), all(c.Paths), ex(c.Policy), all(c.FallbackKeys)
		if fk := vars.value("CACHE_FALLBACK_KEY"); fk != "" {
			if w := fallbackRefused(fk); w != "" {
				warnings = append(warnings, w)
			} else {
				c.FallbackKeys = append(c.FallbackKeys, fk)
			}
		}
	}
	return slices.Compact(warnings)
}

// fallbackRefused says why CACHE_FALLBACK_KEY may not be used, or "". A
// key ending in -protected names the cache GitLab keeps apart for
// protected branches: a job of an unprotected branch must not restore it
// through the fallback, so gitlab-runner refuses it (shells/abstract.go),
// trailing dots and spaces ignored.
func fallbackRefused(key string) string {
	const blocked = "-protected"
	if strings.HasSuffix(strings.TrimRight(key, ". "), blocked) {
		return fmt.Sprintf("CACHE_FALLBACK_KEY %q not allowed to end in %q", key, blocked)
	}
	return ""
}

// expandImages expands image and service names; they are needed before
// the rest of the variables (CI_JOB_IMAGE).
func expandImages(p *jobPayload, vars jobVars) {
	if p.Image != nil {
		p.Image.Name = vars.expand(p.Image.Name)
	}
	for i := range p.Services {
		p.Services[i].Name = vars.expand(p.Services[i].Name)
	}
}

// resolvePayloadMarks puts the builds dir, once known, in the artifact
// and cache paths that named $CI_BUILDS_DIR or $CI_PROJECT_DIR.
func resolvePayloadMarks(p *jobPayload, builds string) {
	all := func(ss []string) {
		for i := range ss {
			ss[i] = resolveMarks(ss[i], builds)
		}
	}
	for i := range p.Artifacts {
		a := &p.Artifacts[i]
		a.Name = resolveMarks(a.Name, builds)
		all(a.Paths)
		all(a.Exclude)
	}
	for i := range p.Cache {
		c := &p.Cache[i]
		c.Key = resolveMarks(c.Key, builds)
		all(c.Paths)
		all(c.FallbackKeys)
	}
}
