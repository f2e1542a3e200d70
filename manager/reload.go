package manager

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/internal/logging"
	"github.com/berth-ci/berth/scaler"
)

// reloader remembers the config last applied, to tell what a reload
// changes; m.cfg stays the one berth started with (many goroutines read it).
type reloader struct {
	mu      sync.Mutex
	applied *config.Config
}

// Reload applies what can change while berth runs from cfg, a config read
// again from the file (SIGHUP, `berth config reload`): the policy periods,
// max_instances, max_use_count, log_level and the GitLab sources'
// settings (reloadsources.go's liveSourceKeys), without stopping a job. A change
// to anything else is named in NeedsRestart and not applied. Nothing is
// applied when cfg's policies cannot be scheduled.
func (m *Manager) Reload(cfg *config.Config) (api.ReloadResult, error) {
	m.reload.mu.Lock()
	defer m.reload.mu.Unlock()
	old := m.reload.applied
	if old == nil {
		old = m.cfg
	}
	res := api.ReloadResult{Applied: []string{}, NeedsRestart: restartOnly(old, cfg)}
	oa, na := old.Autoscaler, cfg.Autoscaler
	if !reflect.DeepEqual(oa.Policies, na.Policies) || oa.MaxInstances != na.MaxInstances || oa.MaxUseCount != na.MaxUseCount {
		if _, err := na.NewSchedule(); err != nil {
			return api.ReloadResult{}, fmt.Errorf("autoscaler.policy: %w", err)
		}
		if f := m.live.Load(); f != nil {
			if err := m.setLimits(f, na); err != nil {
				return api.ReloadResult{}, err
			}
		} // else a standby or a berth still starting: takeCharge applies it
		for _, k := range []struct {
			key     string
			changed bool
		}{{"autoscaler.policy", !reflect.DeepEqual(oa.Policies, na.Policies)},
			{"autoscaler.max_instances", oa.MaxInstances != na.MaxInstances},
			{"autoscaler.max_use_count", oa.MaxUseCount != na.MaxUseCount}} {
			if k.changed {
				res.Applied = append(res.Applied, k.key)
			}
		}
	}
	if old.LogLevel != cfg.LogLevel {
		if err := logging.SetLevel(cfg.LogLevel); err != nil {
			return api.ReloadResult{}, err
		}
		res.Applied = append(res.Applied, "log_level")
	}
	// What needs a restart stays as it was, so that the next reload
	// still names it.
	next := *old
	next.Autoscaler.Policies, next.Autoscaler.MaxInstances, next.Autoscaler.MaxUseCount = na.Policies, na.MaxInstances, na.MaxUseCount
	next.LogLevel = cfg.LogLevel
	var applied []string
	next.Sources, applied = m.reloadSources(old.Sources, cfg.Sources)
	res.Applied = append(res.Applied, applied...)
	m.reload.applied = &next
	m.log.Info("config reloaded", "applied", res.Applied, "needs_restart", res.NeedsRestart,
		"max_instances", na.MaxInstances, "policy_periods", len(na.Policies))
	return res, nil
}

// setLimits gives the fleet a's policy, max_instances and max_use_count.
func (m *Manager) setLimits(f interface {
	SetLimits(scaler.Policies, int, int) error
}, a config.Autoscaler) error {
	sched, err := a.NewSchedule()
	if err != nil {
		return err
	}
	maxInst := a.MaxInstances
	if m.info.MaxSize > 0 && maxInst > m.info.MaxSize {
		maxInst = m.info.MaxSize // as at start: the provider's group is the bound
	}
	return f.SetLimits(sched, maxInst, a.MaxUseCount)
}

// applyReloaded gives a fleet made after a reload (takeCharge) the limits
// the reload applied, which the core's config, read from the file as
// berth started, does not have.
func (m *Manager) applyReloaded() {
	m.reload.mu.Lock()
	defer m.reload.mu.Unlock()
	if a := m.reload.applied; a != nil {
		if err := m.setLimits(m.fleet, a.Autoscaler); err != nil {
			m.log.Warn("the reloaded policy and limits could not be applied to the fleet", "err", err.Error())
		}
	}
}

// restartOnly names the settings that differ between old and cfg and that
// berth reads only when it starts.
func restartOnly(old, cfg *config.Config) []string {
	out := []string{}
	diff := func(key string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			out = append(out, key)
		}
	}
	diff("listen", old.Listen, cfg.Listen)
	diff("state_dir", old.StateDir, cfg.StateDir)
	diff("tls_cert_file, tls_key_file", [2]string{old.TLSCertFile, old.TLSKeyFile}, [2]string{cfg.TLSCertFile, cfg.TLSKeyFile})
	diff("log_format", old.LogFormat, cfg.LogFormat)
	diff("job_timeout", old.JobTimeout, cfg.JobTimeout)
	diff("shutdown_timeout", old.ShutdownTimeout, cfg.ShutdownTimeout)
	diff("job_retention, log_retention", [2]any{old.JobRetention, old.LogRetention}, [2]any{cfg.JobRetention, cfg.LogRetention})
	out = append(out, sourcesRestartOnly(old.Sources, cfg.Sources)...)
	diff("cache", old.Cache, cfg.Cache)
	diff("images", old.Images, cfg.Images)
	diff("ha", old.HA, cfg.HA)
	oa, na := old.Autoscaler, cfg.Autoscaler
	diff("autoscaler.provider", [2]string{oa.Provider, oa.ProviderPath}, [2]string{na.Provider, na.ProviderPath})
	diff("autoscaler.provider_config", string(oa.ProviderConfig), string(na.ProviderConfig))
	oa.Provider, oa.ProviderPath, oa.ProviderConfig, oa.Policies, oa.MaxInstances, oa.MaxUseCount = "", "", nil, nil, 0, 0
	na.Provider, na.ProviderPath, na.ProviderConfig, na.Policies, na.MaxInstances, na.MaxUseCount = "", "", nil, nil, 0, 0
	diff("autoscaler (other keys)", oa, na)
	return out
}

// serveReload is POST /api/v1/config/reload: `berth config reload` reads
// the config file again, as SIGHUP does. Admin only: it changes the fleet.
func (m *Manager) serveReload(w http.ResponseWriter, r *http.Request) {
	if !api.PrincipalFrom(r.Context()).Admin {
		api.WriteError(w, http.StatusForbidden, "only the admin token may reload the config")
		return
	}
	if m.opts.LoadConfig == nil {
		api.WriteError(w, http.StatusConflict, "this berth runs without a config file; start it with --config FILE to reload one")
		return
	}
	cfg, err := m.opts.LoadConfig()
	if err != nil {
		api.WriteError(w, http.StatusUnprocessableEntity, fmt.Sprintf("the config file was not applied: %v", err))
		return
	}
	res, err := m.Reload(cfg)
	if err != nil {
		api.WriteError(w, http.StatusUnprocessableEntity, fmt.Sprintf("the config file was not applied: %v", err))
		return
	}
	api.WriteJSON(w, http.StatusOK, res)
}
