package manager

import (
	"fmt"
	"maps"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/jobsource/gitlab"
)

// liveSourceKeys are the [[source]] keys a reload applies to a running
// GitLab source: a job already taken keeps the values it started with
// (gitlab.Settings). The other keys (kind, url, token, token_file,
// ca_file, proxy) say which runner this is and how berth reaches GitLab;
// a change to them, or a source added or removed, needs a restart.
var liveSourceKeys = []struct {
	key  string
	same func(a, b config.Source) bool
	copy func(dst *config.Source, src config.Source)
}{
	{"request_concurrency", func(a, b config.Source) bool { return a.RequestConcurrency == b.RequestConcurrency },
		func(d *config.Source, s config.Source) { d.RequestConcurrency = s.RequestConcurrency }},
	{"check_interval", func(a, b config.Source) bool { return a.CheckInterval == b.CheckInterval },
		func(d *config.Source, s config.Source) { d.CheckInterval = s.CheckInterval }},
	{"builds_dir", func(a, b config.Source) bool { return a.BuildsDir == b.BuildsDir },
		func(d *config.Source, s config.Source) { d.BuildsDir = s.BuildsDir }},
	{"output_limit", func(a, b config.Source) bool { return a.OutputLimit == b.OutputLimit },
		func(d *config.Source, s config.Source) { d.OutputLimit = s.OutputLimit }},
	{"max_artifact_size", func(a, b config.Source) bool { return a.MaxArtifactSize == b.MaxArtifactSize },
		func(d *config.Source, s config.Source) { d.MaxArtifactSize = s.MaxArtifactSize }},
	{"image", func(a, b config.Source) bool { return a.Image == b.Image },
		func(d *config.Source, s config.Source) { d.Image = s.Image }},
	{"allow_shell_jobs", func(a, b config.Source) bool { return a.AllowShellJobs == b.AllowShellJobs },
		func(d *config.Source, s config.Source) { d.AllowShellJobs = s.AllowShellJobs }},
}

// sourceIdentity holds the keys of s that a reload does not apply. A
// token_file's content is not one: the source rotates the token and
// writes the new one there itself.
func sourceIdentity(s config.Source) map[string]string {
	tok := s.Token
	if s.TokenFile != "" {
		tok = ""
	}
	return map[string]string{"kind": s.Kind, "url": s.URL, "token": tok, "token_file": s.TokenFile,
		"ca_file": s.CAFile, "proxy": s.Proxy}
}

// sourcesRestartOnly names the source changes only a restart applies:
// sources added or removed, or a source's identity keys. Sources are
// matched by their place in the file, source[0] being the first (as config check counts).
func sourcesRestartOnly(old, cfg []config.Source) []string {
	if len(old) != len(cfg) {
		return []string{fmt.Sprintf("source (%d [[source]] sections, were %d: adding or removing a source)", len(cfg), len(old))}
	}
	var out []string
	for i := range cfg {
		o, n := sourceIdentity(old[i]), sourceIdentity(cfg[i])
		for _, k := range []string{"kind", "url", "token", "token_file", "ca_file", "proxy"} {
			if o[k] != n[k] {
				out = append(out, fmt.Sprintf("source[%d].%s", i, k))
			}
		}
	}
	return out
}

// reloadSources applies cfg's live settings to the running GitLab sources
// whose identity did not change, and returns the sources as now applied
// (old's, with what was applied) and the keys applied.
func (m *Manager) reloadSources(old, cfg []config.Source) ([]config.Source, []string) {
	next := append([]config.Source(nil), old...)
	if len(old) != len(cfg) || len(m.sources) < len(cfg) {
		return next, nil
	}
	var applied []string
	for i := range cfg {
		g, ok := m.sources[i].src.(*gitlab.Source)
		if !ok || !maps.Equal(sourceIdentity(old[i]), sourceIdentity(cfg[i])) {
			continue
		}
		var keys []string
		for _, k := range liveSourceKeys {
			if !k.same(old[i], cfg[i]) {
				k.copy(&next[i], cfg[i])
				keys = append(keys, fmt.Sprintf("source[%d].%s", i, k.key))
			}
		}
		if len(keys) == 0 {
			continue
		}
		s := next[i]
		g.SetSettings(gitlab.Settings{RequestConcurrency: s.RequestConcurrency, CheckInterval: s.CheckInterval,
			BuildsDir: s.BuildsDir, OutputLimit: s.OutputLimit, MaxArtifactSize: s.MaxArtifactSize,
			DefaultImage: s.Image, RefuseShellJobs: m.refusesShellJobs(s)})
		m.sources[i].loops.resize(s.RequestConcurrency)
		applied = append(applied, keys...)
	}
	return next, applied
}

// refusesShellJobs says whether s refuses a job without an image: under
// [images] allowed_images (read at start), unless s allows shell jobs.
func (m *Manager) refusesShellJobs(s config.Source) bool {
	return len(m.cfg.Images.AllowedImages) > 0 && !s.AllowShellJobs
}
