package gitlab

import (
	"os"
	"strings"
)

// GitLab leaves some job keywords for the runner to expand with the job's
// variables: artifacts:name, paths and exclude; cache:key, paths, policy
// and fallback_keys; image and service names (GitLab's "Where variables
// can be used", runner column). expandPayload does it once, when the job
// arrives, so everything after sees the final values.
func expandPayload(p *jobPayload) {
	values := map[string]string{}
	for _, v := range expandVariables(p.Variables) {
		values[v.Key] = v.Value
	}
	ex := func(s string) string { return expandString(s, values) }
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
		if fk := values["CACHE_FALLBACK_KEY"]; fk != "" {
			c.FallbackKeys = append(c.FallbackKeys, fk)
		}
	}
	if p.Image != nil {
		p.Image.Name = ex(p.Image.Name)
	}
	for i := range p.Services {
		p.Services[i].Name = ex(p.Services[i].Name)
	}
}

// expandString expands $VAR and ${VAR} in s from values, as the runner
// does; unknown names become empty and $$ is a literal $.
func expandString(s string, values map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	const dollar = "\x00dollar"
	s = strings.ReplaceAll(s, "$$", dollar)
	out := os.Expand(s, func(name string) string { return values[name] })
	return strings.ReplaceAll(out, dollar, "$")
}
