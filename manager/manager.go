// Package manager is berth's daemon: it wires the state store, the provider,
// the core (through package fleet), the job sources and the executor, and
// runs the job loop: reserve → take a job → acquire → run → release, or
// unreserve when no job came.
package manager

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/console"
	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/gitlab"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/metrics"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/plugin"
	"github.com/berth-ci/berth/scaler"
)

// Options tune the daemon beyond the config file.
type Options struct {
	// ShutdownGrace, when positive, overrides the config's shutdown_timeout:
	// how long running jobs may go on after a stop signal before they are
	// canceled.
	ShutdownGrace time.Duration
	// Force, when closed during a graceful stop, cancels the running jobs at
	// once instead of waiting for the grace period (a second SIGINT/SIGTERM).
	Force <-chan struct{}
	// UpdateInterval is how often the provider is listed (default 2s).
	UpdateInterval time.Duration
	// Version is berth's version, reported to job sources.
	Version string
	// Ready, if set, receives the HTTP address once the server listens.
	Ready chan<- string
	// LoadConfig, if set, reads the config file again for a reload
	// (SIGHUP, POST /api/v1/config/reload); nil when berth runs without
	// a file.
	LoadConfig func() (*config.Config, error)
	// StartRetryMax bounds the wait between attempts to initialise a
	// provider that failed with a transient error at start (default 30s).
	StartRetryMax time.Duration
	// FinishRetryMax bounds the wait between attempts to save a job result
	// that could not be written (default 30s).
	FinishRetryMax time.Duration
	// BackupInterval is how often the last good copies state.db.bak and
	// queue.db.bak are rewritten (default 5m); they are also written at
	// start and at a clean stop.
	BackupInterval time.Duration
}

// source is a job source and how many job loops take its jobs (each
// holds one request in flight): request_concurrency, which a reload may
// change (loops.go).
type source struct {
	src   jobsource.Source
	loops *loopCount
}

// Manager is the daemon.
type Manager struct {
	cfg  *config.Config
	opts Options
	log  *slog.Logger
	// reload is what the last config reload applied (reload.go).
	reload reloader

	store stateStore
	// hostKeys records the host keys a provider plugin cannot report.
	hostKeys plugin.HostKeyStore
	// ha is this manager's part in the election; nil without [ha].
	ha   *haState
	prov provider.InstanceGroup
	// fleetProv is the provider the fleet calls: prov without the gate,
	// since the fleet confirms leadership itself right before each of its
	// calls (through the store, store.Leader).
	fleetProv provider.InstanceGroup
	plugin    *plugin.Group // nil for a built-in provider
	info      provider.Info
	// restarted signals a restart of the provider plugin.
	restarted chan struct{}
	fleet     *fleet.Fleet
	// live is the fleet of the current term for readers outside it
	// (/metrics): nil while a standby.
	live    atomic.Pointer[fleet.Fleet]
	queue   *queue.Queue
	sources []source
	metrics *metrics.Metrics
	runner  *executor.Runner

	auth  *authenticator
	hosts hostPolicy
	tls   *tls.Config

	console *console.Console // the web console at /ui/ (console.go)

	jobs sync.WaitGroup
	// glJobs records the GitLab jobs taken, for the job list (gitlabjobs.go).
	glJobs gitlabJobs
	fds    fdUsage
	// waiting is why the built-in queue's jobs wait (waiting.go).
	waiting waitState

	// hostImages is the provider's host-side image cache: berth pulls
	// jobs' images there itself (image.go). nil: instances pull.
	hostImages provider.ImageCacher

	// serving is set once Run serves the API on the listen address.
	serving bool
	// jobCtx is the context of every job, canceled at the end of the
	// shutdown grace period (cancelJobs).
	jobCtx     context.Context
	cancelJobs context.CancelFunc
}

// New opens the state, initialises the provider and the job sources, and
// restores the fleet. Nothing runs until Run. Under [ha] it connects to
// etcd instead and acts on nothing: the provider and the fleet wait until
// Run wins a term (ha.go).
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, opts Options) (_ *Manager, err error) {
	opts = opts.withDefaults(cfg)
	m := &Manager{cfg: cfg, opts: opts, log: log, runner: &executor.Runner{Logger: log}}
	defer func() {
		if err != nil {
			m.close(context.Background())
		}
	}()
	for _, w := range cfg.Warnings {
		log.Warn("config: " + w.String())
	}
	raiseFileLimit(log)
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w; pass a writable --state-dir", cfg.StateDir, err)
	}
	if err := m.setupHTTP(); err != nil {
		return nil, err
	}
	m.metrics = metrics.New(m.counts)
	m.restarted = make(chan struct{}, 1)
	if cfg.HA != nil {
		err = m.openHA(ctx)
	} else {
		err = m.openBolt()
	}
	if err != nil {
		return nil, err
	}
	if m.queue, err = m.openQueue(ctx); err != nil {
		return nil, err
	}
	warnIsolatedGitLab(cfg, log)
	if cfg.HA == nil { // a single manager leads from the start
		if err := m.takeCharge(ctx); err != nil {
			return nil, err
		}
		m.metrics.Leader.Set(1)
	}
	m.setupConsole()
	if m.sources, err = m.openSources(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// withDefaults fills in what the caller left zero.
func (o Options) withDefaults(cfg *config.Config) Options {
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = cfg.ShutdownTimeout
	}
	if o.UpdateInterval <= 0 {
		o.UpdateInterval = 2 * time.Second
	}
	if o.BackupInterval <= 0 {
		o.BackupInterval = 5 * time.Minute
	}
	return o
}

// openQueue opens the built-in queue: the one place that chooses its
// storage. Under [ha] it lives in etcd under <key_prefix>queue/, shared by
// every manager: any of them queues and reads jobs, only the leader of
// the current term takes, starts and finishes them (queueFence).
func (m *Manager) openQueue(ctx context.Context) (*queue.Queue, error) {
	opts := []queue.Option{queue.WithLogger(m.log), queue.WithResumeCheck(m.checkResumeKey), queue.WithWaitReason(m.explainWait)}
	if m.ha != nil {
		// The highest job ID seen is kept here too: IDs never repeat after
		// etcd lost its data (issue 32).
		opts = append(opts, queue.WithIDFloorFile(idFloorPath(m.cfg.StateDir)))
		q, err := queue.OpenEtcd(ctx, m.ha.cli, queuePrefix(m.cfg.HA), m.queueFence, opts...)
		if err != nil {
			return nil, fmt.Errorf("ha: %w", err)
		}
		return q, nil
	}
	return queue.Open(filepath.Join(m.cfg.StateDir, "queue"), opts...)
}

// counts feeds the fleet gauges of /metrics: zero while no fleet runs here.
func (m *Manager) counts() scaler.Counts {
	if f := m.live.Load(); f != nil {
		return f.Counts()
	}
	return scaler.Counts{}
}

// takeCharge makes this manager the one that acts on the fleet: it opens
// and initialises the provider (once per process), loads the saved state,
// restores the core from it (the restart rules of docs/semantics.md: the
// first listing reconciles it with the provider, dead jobs release their
// slots) and makes the fleet. A single manager calls it in New; under
// [ha] each won term calls it, with ctx ending with the term.
func (m *Manager) takeCharge(ctx context.Context) error {
	if m.prov == nil {
		if err := m.startProvider(ctx); err != nil {
			return err
		}
	}
	saved, haveSaved, err := m.store.Load()
	if err != nil {
		return err
	}
	interrupted := m.queue.Interrupted() // a single manager: the jobs Open failed
	if m.ha != nil {
		// Before any job is taken: the previous leader's running jobs
		// cannot be finished by it any more (its writes are fenced).
		if interrupted, err = m.queue.TakeOver(); err != nil {
			return err
		}
	}
	core, err := m.restoreCore(ctx, saved, haveSaved)
	if err != nil {
		return err
	}
	m.fleet = fleet.New(core, fleet.Options{
		Provider:       m.fleetProv,
		Store:          m.store,
		Logger:         m.log,
		ReadyHook:      m.readyHook,
		ResetInstance:  func(ctx context.Context, id string) error { return m.recycle(ctx, m.log, id) },
		UpdateInterval: m.opts.UpdateInterval,
		Observe:        m.observe,
	})
	m.live.Store(m.fleet)
	m.applyReloaded()
	if haveSaved {
		m.reconcileParked(saved.Envs, interrupted)
	}
	return nil
}

// startProvider opens the provider, wraps it (metrics; under [ha] the
// gate that lets calls through only while this manager leads) and
// initialises it.
func (m *Manager) startProvider(ctx context.Context) error {
	as := m.cfg.Autoscaler
	provName, err := m.openProvider(as)
	if err != nil {
		return err
	}
	m.hostImages, _ = m.prov.(provider.ImageCacher) // Meter's wrapper hides it
	m.prov = m.metrics.Meter(m.prov)                // every provider call timed, by method
	m.fleetProv = m.prov
	if m.ha != nil {
		// Outside the meter: /metrics counts the calls that reached the
		// provider, not those the gate refused. Only the manager's own
		// calls (Init, the resets after a job and of dead jobs, the ready
		// hook's connection details) pass the gate; the fleet's are
		// checked by the fleet, with the same store and proof, so no call
		// is checked twice.
		m.prov = gate(m.prov, m.mayAct)
	}
	m.info, err = m.initProvider(ctx, provName, provider.Settings{Config: as.ProviderConfig, StateDir: m.providerDir(provName),
		Private: privatePaths(m.cfg), Capacity: as.CapacityPerInstance})
	if err != nil {
		_ = m.prov.Shutdown(context.WithoutCancel(ctx))
		m.prov, m.fleetProv, m.plugin = nil, nil, nil
		return fmt.Errorf("initialise provider %q: %w", provName, err)
	}
	return nil
}

// providerDir is the provider's state directory: ha.provider_state_dir
// when set (managers sharing one host), else under the state directory.
func (m *Manager) providerDir(name string) string {
	if m.cfg.HA != nil && m.cfg.HA.ProviderStateDir != "" {
		return m.cfg.HA.ProviderStateDir
	}
	return filepath.Join(m.cfg.StateDir, "provider", name)
}

// coreConfig is the core's configuration from the config file and what the
// provider can do.
func (m *Manager) coreConfig() (scaler.Config, error) {
	as := m.cfg.Autoscaler
	sched, err := as.NewSchedule()
	if err != nil {
		return scaler.Config{}, err
	}
	zone, err := policy.ProfileZone(as.Policies)
	if err != nil {
		return scaler.Config{}, err
	}
	c := scaler.Config{
		ProfileZone:         zone,
		CapacityPerInstance: as.CapacityPerInstance,
		MaxInstances:        as.MaxInstances,
		MaxUseCount:         as.MaxUseCount,
		Policies:            sched,
		ThrottleLimit:       as.ScaleThrottle.Limit,
		ThrottleBurst:       as.ScaleThrottle.Burst,
		ReadyHook:           as.InstanceReadyCommand != "",
		ReadyTimeout:        as.InstanceAcquireTimeout,
		ListingTimeout:      as.InstanceAcquireTimeout,
		HeartbeatInterval:   as.HeartbeatInterval,
		FailureThreshold:    as.FailureThreshold,
		CanSuspend:          m.info.Capabilities.Suspend,
		EnvTTL:              as.EnvironmentTTL,
		EnvEvictAfter:       as.EnvironmentEvictAfter,
		DeleteUnknown:       as.UnknownInstances == config.UnknownInstancesDelete,
		// An instance found running that berth has no record of may hold
		// an unknown job's files: reset it before its first job where the
		// provider can (the same rule as recycle's).
		ResetAdopted: m.canRecycle(),
		// Where it cannot, and the provider's instances are disposable (the
		// clouds), replace it instead of handing it a job (issue 32).
		Disposable:      m.info.Capabilities.Disposable,
		DeleteOnDeadJob: as.DeleteInstanceOnDeadJob,
		SuspendedCost:   as.SuspendedCost,
		// The fleet reports when a job has its instance's connection
		// details; one whose instance goes before that moves (issue 43).
		ConfirmConnect: true,
		// The fleet advances the core every UpdateInterval; a longer step
		// is the wall clock jumping, which must not expire every parked
		// environment at once.
		MaxClockStep: max(time.Minute, 10*m.opts.UpdateInterval),
	}
	if m.info.MaxSize > 0 && c.MaxInstances > m.info.MaxSize {
		m.log.Warn("max_instances is above the provider's group size; using the group size", "max_instances", c.MaxInstances, "provider_max", m.info.MaxSize)
		c.MaxInstances = m.info.MaxSize
	}
	return c, nil
}

// restoreCore makes the core from the saved state, or a new one. Jobs that
// held a slot when their manager died are dead: their slots are released
// and their instances reset (or deleted) before any job is booked there.
func (m *Manager) restoreCore(ctx context.Context, saved scaler.State, haveSaved bool) (*scaler.Scaler, error) {
	coreCfg, err := m.coreConfig()
	if err != nil {
		return nil, err
	}
	if !haveSaved {
		return scaler.New(coreCfg, time.Now()), nil
	}
	core, dead, err := scaler.Restore(coreCfg, saved, time.Now())
	if err != nil {
		return nil, fmt.Errorf("restore state from %s: %w", m.store.Where(), err)
	}
	// What the policy learned beyond the profile comes back with it
	// (scaler/learned.go): the log says how much, and from when.
	var learnedRuns int
	var learnedAt string
	if l := saved.Learned; l != nil {
		learnedRuns, learnedAt = l.RunsN, l.At.UTC().Format(time.RFC3339)
	}
	m.log.Info("restored state", "from", m.store.Where(), "instances", len(saved.Instances),
		"environments", len(saved.Envs), "pending_increases", len(saved.Pending), "dead_jobs", len(dead),
		"learned_run_times", learnedRuns, "learned_at", learnedAt)
	for _, d := range dead {
		m.log.Warn("job died with the berth that ran it; releasing its slot", "key", d.Key, "instance", d.InstanceID)
		// Its leftovers must not reach the next job: reset the
		// instance now, before any job can be booked on it. An
		// environment the job resumed is parked again as the job
		// left it, for its owner only: never reset it.
		if !m.cfg.Autoscaler.DeleteInstanceOnDeadJob && !d.HoldsEnv {
			if err := m.recycle(ctx, m.log, d.InstanceID); err != nil {
				m.log.Error("instance reset failed; deleting the instance so no other job sees what the dead job left", "instance", d.InstanceID, "err", err)
				core.DiscardInstance(d.InstanceID, "reset after a job that died with berth failed: "+err.Error())
			}
		}
	}
	return core, nil
}

// openSources makes the job sources of the config; the built-in queue when
// there is none.
func (m *Manager) openSources(ctx context.Context) ([]source, error) {
	var srcs []source
	for _, s := range m.cfg.Sources {
		switch s.Kind {
		case config.SourceQueue:
			srcs = append(srcs, source{m.queue, newLoopCount(1)})
		case config.SourceGitLab:
			g, err := m.openGitLab(ctx, s)
			if err != nil {
				return nil, fmt.Errorf("source %s: %w", s, err)
			}
			srcs = append(srcs, source{g, newLoopCount(s.RequestConcurrency)})
		}
	}
	if len(srcs) == 0 {
		srcs = append(srcs, source{m.queue, newLoopCount(1)})
	}
	return srcs, nil
}

// openGitLab makes a GitLab source. A stable system
// id (the state's) keeps GitLab from listing a new runner manager after
// each restart, and from listing one per manager under [ha].
func (m *Manager) openGitLab(ctx context.Context, s config.Source) (*gitlab.Source, error) {
	hc, err := gitlab.NewHTTPClient(s.CAFile, s.Proxy)
	if err != nil {
		return nil, err
	}
	cs, err := m.cacheStore()
	if err != nil {
		return nil, err
	}
	var caChain []byte
	if s.CAFile != "" {
		if caChain, err = os.ReadFile(s.CAFile); err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
	}
	// Artifact archives are staged on the state dir's disk, which the
	// operator sized for berth, not in /tmp (often a small tmpfs).
	tmp := filepath.Join(m.cfg.StateDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("a directory for artifact archives: %w", err)
	}
	token, tokenFile := s.Token, s.TokenFile
	if tokenFile != "" {
		token = "" // read again by the source, which saves a rotated token there
	}
	g, err := gitlab.New(gitlab.Config{URL: s.URL, Token: token, TokenFile: tokenFile, RequestConcurrency: s.RequestConcurrency,
		CheckInterval: s.CheckInterval, SystemID: "s_" + m.store.ID(), Version: m.opts.Version,
		BuildsDir: s.BuildsDir, OutputLimit: s.OutputLimit, HTTPClient: hc, Cache: cs,
		TempDir: tmp, MaxArtifactSize: s.MaxArtifactSize,
		OnTokenRotation: func(result string) {
			m.metrics.GitLabTokenRotations.WithLabelValues(s.URL, result).Inc()
		},
		AllowedPullPolicies: allowedPullPolicies(m.cfg.Images),
		Ledger:              m.gitlabLedger(s), CAChain: string(caChain),
		DefaultImage: s.Image, RefuseShellJobs: m.refusesShellJobs(s)}, m.log)
	if err != nil {
		return nil, err
	}
	// The token is verified by sourceLoops, in the background: a GitLab
	// that is down must not keep berth from watching its fleet.
	return g, nil
}

// openProvider picks the provider: the plugin binary provider_path, else
// the built-in of that name, else the plugin berth-provider-NAME (see
// plugin.Find). It returns the provider's name.
func (m *Manager) openProvider(as config.Autoscaler) (string, error) {
	name, path := as.Provider, as.ProviderPath
	if path == "" {
		p, err := provider.New(name)
		if err == nil {
			m.prov = p
			return name, nil
		}
		if path, err = plugin.Find(name, as.PluginDir); err != nil {
			return "", fmt.Errorf("autoscaler.provider: %q is not a built-in provider (those are %v) and %w", name, provider.Names(), err)
		}
	} else {
		name = plugin.NameOf(path)
	}
	m.plugin = plugin.New(plugin.Options{
		Name: name, Path: path, Logger: m.log, HostKeys: m.hostKeys,
		CallTimeout: as.PluginCallTimeout, BackoffReset: as.PluginBackoffReset,
		OnRestart: func() {
			m.metrics.ProviderRestarts.WithLabelValues(name).Inc()
			select { // Run asks the fleet for a listing, which reconciles
			case m.restarted <- struct{}{}:
			default:
			}
		},
	})
	m.prov = m.plugin
	m.metrics.ProviderRestarts.WithLabelValues(name) // shown as 0 until the first restart
	return name, nil
}

// readyHook runs instance_ready_command on a new instance.
func (m *Manager) readyHook(ctx context.Context, id string) error {
	ci, err := m.prov.ConnectInfo(ctx, id)
	if err != nil {
		return fmt.Errorf("connection details: %w", err)
	}
	_, err = m.runner.Output(ctx, ci, m.cfg.Autoscaler.InstanceReadyCommand, 5*time.Minute)
	return err
}

// Run serves HTTP and runs jobs until ctx is done, then stops gracefully: no
// new jobs, running jobs get ShutdownGrace to finish, state is flushed.
// Under [ha] it campaigns and leads the fleet only during its terms.
func (m *Manager) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", m.cfg.Listen)
	if err != nil {
		m.close(context.Background())
		return fmt.Errorf("listen on %s: %w; is another berth running? pass --listen ADDR to use another address", m.cfg.Listen, err)
	}
	m.serving = true
	srv := m.serveHTTP(ln)
	m.log.Info("berth running", "listen", ln.Addr().String(), "tls", m.tls != nil, "provider", m.info.ID, "state_dir", m.cfg.StateDir,
		"max_instances", m.cfg.Autoscaler.MaxInstances, "capacity_per_instance", m.cfg.Autoscaler.CapacityPerInstance, "ha", m.ha != nil)
	if m.opts.Ready != nil {
		m.opts.Ready <- ln.Addr().String()
	}
	consoleCtx, stopConsole := context.WithCancel(context.WithoutCancel(ctx))
	go m.console.Run(consoleCtx)
	backupDone := make(chan struct{})
	go func() { m.backups(ctx); close(backupDone) }()
	pruneDone := make(chan struct{})
	go func() { m.prune(ctx); close(pruneDone) }()

	// Jobs run on their own context, so a stop signal does not kill them
	// at once; under [ha] they outlive the term they were taken in.
	m.jobCtx, m.cancelJobs = context.WithCancel(context.WithoutCancel(ctx))
	defer m.cancelJobs()
	if m.ha != nil {
		watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
		defer stopWatch()
		go m.ha.etcd.run(watchCtx, m.ha.elector.Leader)
		m.campaign(ctx)
		m.waitJobs(m.cancelJobs) // those of terms that ended
	} else {
		m.lead(ctx, nil)
	}
	<-backupDone
	<-pruneDone
	stopConsole()
	shutCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	m.close(shutCtx)
	m.log.Info("stopped")
	return nil
}

// lead runs the fleet and the job loops until ctx ends (a stop: graceful,
// as before [ha]) or the term t does (leadership lost: the loops and the
// fleet stop at once, without any provider call). t is nil for a single
// manager.
func (m *Manager) lead(ctx context.Context, t *ha.Term) {
	l := &leadership{ctx: context.Background(), fleet: m.fleet, term: t}
	if t != nil {
		l.ctx, l.mayAct = t.Context(), m.mayAct
	}
	f := m.fleet
	fleetCtx, stopFleet := context.WithCancel(context.WithoutCancel(ctx))
	fleetDone := make(chan struct{})
	go func() { f.Run(fleetCtx); close(fleetDone) }()
	go m.kickOnRestart(fleetCtx, f)
	go m.sampleMetrics(fleetCtx, f)

	loopCtx, stopLoops := context.WithCancel(ctx)
	defer context.AfterFunc(l.ctx, stopLoops)()
	jobCtx := withLeadership(m.jobCtx, l)
	var loops sync.WaitGroup
	for _, s := range m.sources {
		loops.Add(1)
		go func() { defer loops.Done(); m.sourceLoops(loopCtx, jobCtx, s) }()
	}

	select {
	case <-ctx.Done():
	case <-l.ctx.Done():
	case <-f.Fenced():
		// etcd refused a save, or named another leader right before a
		// provider call: this term is over even if the session has not
		// noticed yet. Hand the key over rather than wait for the lease.
		m.stepDown(f.Err(), stopFleet, &loops, fleetDone)
		if t == nil {
			return
		}
		if err := t.Resign(context.WithoutCancel(ctx)); err != nil {
			m.log.Warn("resigning after the fleet was fenced failed; the lease expires by itself", "err", err)
		}
		return
	}
	if l.ctx.Err() != nil {
		m.stepDown(context.Cause(l.ctx), stopFleet, &loops, fleetDone)
		return
	}
	// Instances that vanish from now on are not replaced, nor is the idle
	// pool refilled: berth would boot machines only to abandon them.
	f.StopScaleUp()
	m.log.Info("stopping: taking no new jobs and starting no instances; running jobs may finish, "+
		"send the signal again to cancel them now", "grace", m.opts.ShutdownGrace)
	loops.Wait()
	m.waitJobs(m.cancelJobs)
	if m.cfg.Autoscaler.DeleteInstancesOnShutdown && l.ctx.Err() == nil {
		m.log.Info("deleting idle instances on shutdown")
		shutCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		f.DeleteIdle(shutCtx)
		cancel()
	}
	stopFleet()
	<-fleetDone
	m.logKeptInstances(f)
}

// stepDown ends a term: the job loops and the fleet stop at once and no
// provider call is made (no deletes, no scale-in, no resets: the gate
// refuses them; the instances are the new leader's). Running jobs go on:
// they end by themselves, or when the new leader resets their instances
// (they then say why, see settle); a stop of berth gives them the grace
// period, as always.
func (m *Manager) stepDown(cause error, stopFleet context.CancelFunc, loops *sync.WaitGroup, fleetDone <-chan struct{}) {
	if m.ha != nil {
		m.ha.leading.Store(false)
	}
	m.log.Warn("lost leadership: stopping the job loops and the fleet now, without any provider call; "+
		"running jobs go on until they end or the new leader resets their instances", "cause", cause)
	m.fleet.Stop(cause) // before anything else: no provider call from here on
	stopFleet()
	loops.Wait()
	<-fleetDone
	m.live.Store(nil)
	m.log.Info("stepped down: standing by")
}

// kickOnRestart has a restarted plugin reconciled by a listing at once.
func (m *Manager) kickOnRestart(ctx context.Context, f *fleet.Fleet) {
	for {
		select {
		case <-m.restarted:
			f.Kick()
		case <-ctx.Done():
			return
		}
	}
}

// waitJobs waits for the running jobs until the grace period is over or a
// second signal comes (Options.Force), then cancels what still runs and
// waits for the jobs to report.
func (m *Manager) waitJobs(cancelJobs context.CancelFunc) {
	done := make(chan struct{})
	go func() { m.jobs.Wait(); close(done) }()
	grace := time.NewTimer(m.opts.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return
	case <-grace.C:
		m.log.Warn("grace period over: canceling running jobs", "grace", m.opts.ShutdownGrace)
	case <-m.opts.Force:
		m.log.Warn("second stop signal: canceling running jobs now")
	}
	cancelJobs()
	<-done
}

// backups rewrites the last good copies of state.db and queue.db until ctx
// is done, so that restoring one loses at most BackupInterval of changes.
func (m *Manager) backups(ctx context.Context) {
	t := time.NewTicker(m.opts.BackupInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.store.Backup(); err != nil {
			m.log.Warn("cannot write the last good copy of the state; the previous one stays", "err", err)
		}
		if err := m.queue.Backup(); err != nil {
			m.log.Warn("cannot write the last good copy of the queue; the previous one stays", "err", err)
		}
	}
}

func (m *Manager) close(ctx context.Context) {
	// Closing the files also writes their last good copies.
	if m.queue != nil {
		if err := m.queue.Close(); err != nil {
			m.log.Warn("close the queue", "err", err)
		}
	}
	if m.prov != nil {
		_ = m.prov.Shutdown(ctx)
	}
	if m.store != nil {
		if err := m.store.Close(); err != nil {
			m.log.Warn("close the state", "err", err)
		}
	}
	if m.ha != nil {
		_ = m.ha.cli.Close()
	}
}

func newKey(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// readySource is a source that must be ready (a GitLab source: its token
// verified) before it is polled; Problem says why it is not, for /healthz.
type readySource interface {
	Ready(ctx context.Context) error
	Problem() string
}

// sourceLoops runs s's job loops, one per allowed request in flight (each
// holds one booking), once s is ready. A source that can never be ready
// (GitLab refused its token) stops alone: the fleet and other sources go
// on, and /healthz names it.
func (m *Manager) sourceLoops(ctx, jobCtx context.Context, s source) {
	var loops sync.WaitGroup
	if r, ok := s.src.(readySource); ok {
		if err := r.Ready(ctx); err != nil {
			if ctx.Err() == nil {
				m.log.Error("job source stopped: it takes no jobs until berth restarts", "source", s.src.Name(), "err", err)
			}
			return
		}
	}
	if g, ok := s.src.(*gitlab.Source); ok {
		loops.Add(1)
		go func() { defer loops.Done(); g.KeepTokenFresh(ctx) }()
	}
	// As many loops as wanted; a reload that raises request_concurrency
	// starts more, one that lowers it ends the extra ones at their next
	// turn (a poll in flight is not cut).
	for {
		for s.loops.live.Load() < s.loops.want.Load() {
			s.loops.live.Add(1)
			loops.Add(1)
			go func() {
				defer loops.Done()
				if !m.jobLoop(ctx, jobCtx, s.src, s.loops.leave) {
					s.loops.live.Add(-1)
				}
			}()
		}
		select {
		case <-s.loops.resized:
		case <-ctx.Done():
			loops.Wait()
			return
		}
	}
}

// jobLoop books a slot, then asks src for a job. A job is never taken
// without a booking (docs/failures.md, failure 1), with one exception: a job that
// resumes a parked environment is served by that environment's own slot, so
// it is taken first and needs none. Without that, parked environments that
// hold every instance would keep their own resumes waiting for ever (issue 9).
// It returns true when it ended because leave said so (a reload lowered
// request_concurrency), false when ctx ended.
func (m *Manager) jobLoop(ctx, jobCtx context.Context, src jobsource.Source, leave func() bool) bool {
	waiter, _ := src.(jobsource.Waiter)
	resumer, _ := src.(jobsource.Resumer)
	batcher, _ := src.(batchSource)
	idle := time.Second
	// A long-polling source books polls, not demand: an idle GitLab must
	// start no instance (docs/semantics.md, "Poll bookings").
	reserve, promote := m.fleet.Reserve, func(string) error { return nil }
	g, _ := src.(*gitlab.Source)
	if g != nil {
		reserve, promote = m.fleet.ReservePoll, m.fleet.Promote
	}
	// Only the built-in queue's jobs say why they wait (waiting.go).
	var track *waitState
	if _, ok := src.(*queue.Queue); ok {
		track = &m.waiting
	}
	for ctx.Err() == nil {
		if leave() {
			return true
		}
		if g != nil {
			idle = g.CheckInterval() // a reload may change it
		}
		if waiter != nil {
			if err := waiter.WaitForJobs(ctx); err != nil {
				return false
			}
		}
		if !m.mayTakeJob(ctx, idle, track) {
			continue
		}
		var srcChanged <-chan struct{}
		if resumer != nil {
			srcChanged = resumer.Changed()
			if m.takeResumeJob(ctx, jobCtx, resumer) {
				continue
			}
		}
		if batcher != nil && m.takeBatch(ctx, jobCtx, batcher) {
			continue
		}
		changed := m.fleet.Changed()
		key := newKey("job-")
		if err := reserve(key); err != nil {
			if track != nil {
				track.refused(m.log, err)
			}
			if !errors.Is(err, scaler.ErrNoCapacity) {
				m.log.Error("reserve failed", "err", err)
			} else if waiter != nil {
				// A job is known to wait (WaitForJobs returned): if parked
				// environments hold every instance, make room.
				m.fleet.RelieveParked()
			}
			m.reportQueued(src)
			select { // wait for capacity or the jobs to change; the timer bounds the wait
			case <-changed:
			case <-srcChanged:
			case <-time.After(5 * time.Second):
			case <-ctx.Done():
			}
			// The jobs counted may be gone (canceled): a stale count would
			// boot an instance for nobody once one goes (issue 43).
			m.reportQueued(src)
			continue
		}
		job, err := src.Request(ctx)
		if err != nil || job == nil {
			_ = m.fleet.Unreserve(key)
			if err != nil && ctx.Err() == nil {
				m.log.Warn("job request failed", "source", src.Name(), "err", err)
			}
			if waiter == nil || err != nil {
				select {
				case <-time.After(idle):
				case <-ctx.Done():
				}
			}
			continue
		}
		if g != nil {
			job = m.glJobs.track(job, time.Now())
		}
		if err := promote(key); err != nil {
			m.log.Error("promote poll booking", "key", key, "err", err)
		}
		m.reportQueued(src)
		if track != nil {
			track.took(m.log)
		}
		m.startJob(jobCtx, key, job)
	}
	return false
}

// mayTakeJob says whether the job loop may take a job now. Under [ha]
// etcd confirms the term first: a leader resumed after a pause longer than
// its lease takes none (its term ends, stepDown follows). A refusal waits
// idle before it returns.
func (m *Manager) mayTakeJob(ctx context.Context, idle time.Duration, track *waitState) bool {
	err := m.mayAct(ctx)
	if err == nil {
		return true
	}
	m.log.Warn("not taking a job: this manager may not act on the fleet", "err", err)
	if track != nil {
		track.set(m.log, api.WaitLeadership, "this berth may not take jobs now: "+err.Error())
	}
	select {
	case <-time.After(idle):
	case <-ctx.Done():
	}
	return false
}

// takeResumeJob starts the oldest queued job that resumes an environment no
// other job is resuming, and reports whether it started one. Resume either
// gets the environment's own slot or fails at once (unknown, expired or lost
// environment), so the job never waits on capacity.
func (m *Manager) takeResumeJob(ctx, jobCtx context.Context, src jobsource.Resumer) bool {
	job, err := src.RequestResume(ctx, func(envKey string) bool { return !m.fleet.EnvBusy(envKey) })
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("resume job request failed", "err", err)
		}
		return false
	}
	if job == nil {
		return false
	}
	m.startJob(jobCtx, newKey("job-"), job)
	return true
}

// reportQueued tells the core how many jobs wait in the built-in queue with
// no booking: demand it must start instances for even in preemptive mode,
// where a job loop can book only idle slots. It runs when a booking was
// refused and after a job was taken (the queue then holds one less). Other
// sources cannot say.
func (m *Manager) reportQueued(src jobsource.Source) {
	q, ok := src.(*queue.Queue)
	if !ok {
		return
	}
	n, err := q.Len()
	if err != nil {
		m.log.Warn("count queued jobs", "err", err)
		return
	}
	m.fleet.Queued(n)
}

func (m *Manager) startJob(jobCtx context.Context, key string, job jobsource.Job) {
	m.jobs.Add(1)
	go m.runJob(jobCtx, key, job)
}

// envState is the opaque state saved with a parked environment. It holds
// the parking job's result too, written in the same state.db commit as the
// key: a berth killed before the job's record got the key finds both here
// at the next start (issue 19, failure 5; see reconcileParked).
type envState struct {
	Job      string    `json:"job"`
	ParkedAt time.Time `json:"parked_at"`
	// Source is the job source's name ("queue" for the built-in queue).
	Source   string `json:"source,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
	Failure  string `json:"failure,omitempty"`
	Message  string `json:"message,omitempty"`
}

// runJob acquires the booked slot, runs the job and gives the slot back (or
// parks the environment). The job belongs to the leadership it was taken
// under (ctx carries it): a term that ends stops its acquisition but not
// its run (see settle).
//
// runJob is the job's goroutine. For the job's whole run it holds only
// its own frame and Wait's, so it is kept thin and everything else is
// done in functions that have returned by then: the runtime halves a
// goroutine's stack at a GC only while less than a quarter of it (minus
// 800 bytes) is in use. Blocked under runJob, execute and runScript
// (4.9 KiB down to the netpoller) a job's stack stayed 8 KiB, or 16 KiB
// when it grew while the job started; under runJob and Wait (about 1 KiB)
// it comes back to 4 KiB (manager/stack_test.go).
func (m *Manager) runJob(ctx context.Context, key string, job jobsource.Job) {
	defer m.jobs.Done()
	r := m.beginJob(ctx, key, job)
	if r == nil {
		return
	}
	code, err := m.startScript(ctx, r).Wait()
	m.endJob(ctx, r, code, err)
}

// jobRun is what runJob keeps about a job while its script runs.
type jobRun struct {
	l    *leadership
	key  string
	job  jobsource.Job
	spec jobsource.Spec
	log  *slog.Logger
	acq  fleet.Acquisition
	run  *scriptRun
}

// beginJob binds an instance to the job and reports it started; nil when
// no instance could be had (the job is then finished as a system failure).
func (m *Manager) beginJob(ctx context.Context, key string, job jobsource.Job) *jobRun {
	r := &jobRun{l: leadershipOf(ctx, m), key: key, job: job, spec: job.Spec()}
	r.log = m.log.With("job", job.ID(), "key", key)
	if w, ok := job.(interface{ CreatedAt() time.Time }); ok {
		// The wait the sizing steers by is the one the user sees: from the
		// job's arrival in its queue, not from this Acquire (in preemptive
		// mode a job is booked only onto an idle slot, so all of its wait
		// is spent queued).
		if err := r.l.fleet.ArrivedAt(key, w.CreatedAt()); err != nil {
			r.log.Debug("job's arrival not given to the core", "err", err)
		}
	}
	acq, err := m.acquire(ctx, r.l, key, r.spec)
	if err != nil {
		msg := "berth could not provide an instance: " + err.Error()
		if r.l.ended(ctx) {
			msg = errLostLeadFirst
		} else if acq.Instance != "" {
			_ = r.l.fleet.Release(key)
		}
		m.finishRun(ctx, r, jobsource.Result{ExitCode: -1, Failure: jobsource.FailureSystem, Instance: acq.Instance, Message: msg})
		return nil
	}
	r.acq = acq
	job.Started(acq.Instance)
	m.consoleJobStarted(job, acq.Instance)
	if w, ok := job.(interface{ CreatedAt() time.Time }); ok {
		m.metrics.QueueWait.Observe(time.Since(w.CreatedAt()).Seconds())
	}
	r.log.Info("job started", "instance", acq.Instance)
	return r
}

// endJob maps how the script ended, runs the after_script, gives the slot
// back or parks the environment, then finishes the job.
func (m *Manager) endJob(ctx context.Context, r *jobRun, code int, err error) {
	res := m.endRun(ctx, r, r.run, code, err)
	r.run.stop()
	res.Instance = r.acq.Instance
	m.finishRun(ctx, r, m.settle(ctx, r.l, r.log, r.key, r.spec, r.job, r.acq, res))
}

// finishRun reports the job's result everywhere it is counted.
func (m *Manager) finishRun(ctx context.Context, r *jobRun, res jobsource.Result) {
	m.consoleJobFinished(r.job, res)
	m.metrics.Jobs.WithLabelValues(resultLabel(res)).Inc()
	m.finishJob(ctx, r.log, r.job, res)
	r.log.Info("job finished", "instance", res.Instance, "exit_code", res.ExitCode, "failure", res.Failure, "message", res.Message)
}

// acquire binds the booked slot (or the parked environment) to the job.
// It gives up when the leadership ends: the fleet it waits on stopped.
func (m *Manager) acquire(ctx context.Context, l *leadership, key string, spec jobsource.Spec) (fleet.Acquisition, error) {
	acqCtx, cancel := context.WithTimeout(ctx, m.cfg.Autoscaler.InstanceAcquireTimeout)
	defer cancel()
	defer context.AfterFunc(l.ctx, cancel)()
	if spec.ResumeKey == "" {
		return l.fleet.Acquire(acqCtx, key)
	}
	// The environment's own slot is the booking; a job taken by
	// takeResumeJob holds none, and Unreserve then has nothing to do.
	_ = l.fleet.Unreserve(key)
	if err := m.checkEnvKey(spec.ResumeKey); err != nil {
		return fleet.Acquisition{}, err
	}
	return l.fleet.Resume(acqCtx, spec.ResumeKey, key)
}

// settle gives the job's slot back after it ran: it resets the instance
// and releases the slot, or parks the environment. When the leadership the
// job was taken under has ended, the slot and the instance are the new
// leader's (a dead job to it, whose instance it resets): nothing is reset,
// released or parked, a job that succeeded keeps its result, and any
// other end may be the new leader's reset and says so.
func (m *Manager) settle(ctx context.Context, l *leadership, log *slog.Logger, key string, spec jobsource.Spec, job jobsource.Job, acq fleet.Acquisition, res jobsource.Result) jobsource.Result {
	if l.ended(ctx) {
		if res.Failure != jobsource.FailureNone {
			res.ExitCode, res.Failure, res.Message = -1, jobsource.FailureSystem, errLostLead.Error()+" (the job ended with: "+res.Message+")"
		}
		return res
	}
	lost := acq.LostReason() != ""
	if !spec.Suspend || lost || res.Failure == jobsource.FailureSystem {
		m.recycleAndRelease(ctx, l.fleet, log, key, acq.Instance)
		return res
	}
	envKey := spec.ResumeKey
	if envKey == "" {
		envKey = newKey(m.store.ID() + "-")
	}
	state, _ := json.Marshal(envState{Job: job.ID(), ParkedAt: time.Now().UTC(), Source: m.sourceName(job),
		ExitCode: res.ExitCode, Failure: string(res.Failure), Message: res.Message})
	if err := l.fleet.Suspend(key, envKey, state); err != nil {
		fmt.Fprintf(job.Log(), "\nberth: could not park the environment: %v\n", err)
		m.recycleAndRelease(ctx, l.fleet, log, key, acq.Instance)
	} else {
		res.EnvKey = envKey
	}
	return res
}

// finishJob reports the job's result. A result the built-in queue could not
// write (a full disk, an I/O error) is written again, with backoff, until
// it is saved or jobCtx ends at the end of the shutdown grace: before issue
// 19 the job stayed "running", `submit --wait` never returned, and the next
// start failed a job that had exited 0.
func (m *Manager) finishJob(jobCtx context.Context, log *slog.Logger, job jobsource.Job, r jobsource.Result) {
	wait := min(time.Second, m.opts.finishRetryMax())
	for attempt := 1; ; attempt++ {
		err := m.mayFinish(jobCtx, job)
		if err == nil {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(jobCtx), time.Minute)
			err = job.Finish(fctx, r)
			cancel()
		}
		if err == nil {
			if attempt > 1 {
				log.Info("job result saved after retrying", "attempts", attempt)
			}
			return
		}
		switch {
		case errors.Is(err, queue.ErrNotLeader) || errors.Is(err, queue.ErrFenced):
			if !m.resultStillOpen(log, job) {
				return
			}
			log.Warn("cannot record the job result: this manager does not lead now; retrying until it leads again or another leader ends the job",
				"attempt", attempt, "next_try_in", wait, "err", err)
		case errors.Is(err, queue.ErrNoSpace) || errors.Is(err, queue.ErrWrite):
			log.Error("cannot save the job result; retrying until it can be written (free disk space)", "attempt", attempt, "next_try_in", wait, "err", err)
		default:
			log.Error("report job result", "err", err)
			return
		}
		select {
		case <-time.After(wait):
		case <-jobCtx.Done():
			next := "the next start marks the job failed"
			if m.ha != nil {
				next = "the next leader's takeover marks the job failed"
			}
			log.Error("giving up saving the job result: berth is stopping; "+next, "err", err)
			return
		}
		wait = min(2*wait, m.opts.finishRetryMax())
	}
}

// mayFinish holds back the Finish of a built-in queue job under [ha] while
// this manager cannot show that it leads (a standby, a term that ended,
// etcd unreachable): Finish closes the job's log, and a log that cannot
// reach etcd then would turn a success into "could not store its output".
// Held back, the log stays open in memory and the result waits for a
// later term of this manager (etcd back), unless another leader ends the
// job first (resultStillOpen).
func (m *Manager) mayFinish(ctx context.Context, job jobsource.Job) error {
	if _, ok := job.(*queue.Job); !ok || m.ha == nil {
		return nil
	}
	if err := m.mayAct(ctx); err != nil {
		return fmt.Errorf("%w (%v)", queue.ErrNotLeader, err)
	}
	return nil
}

// resultStillOpen says whether a queue job whose result the etcd queue
// refused to this manager (not the leader, or fenced) is still running in
// the shared queue, so that a later term of this manager may record it.
// Once another leader took the queue over, the job is failed with
// queue.FailoverReason and that stays its result: the new leader reset its
// instance, and a success seen only by a manager that no longer led
// cannot be told from one it would have recorded after that reset.
func (m *Manager) resultStillOpen(log *slog.Logger, job jobsource.Job) bool {
	if _, ok := job.(*queue.Job); !ok {
		return false
	}
	j, err := m.queue.Get(job.ID())
	if errors.Is(err, queue.ErrNotFound) {
		// etcd holds no such job: it was restored from a snapshot taken
		// before the job was submitted (issue 43). No term can record the
		// result; retrying would keep a stopping manager alive for ever.
		log.Warn("job result not recorded: etcd no longer holds the job (restored from a snapshot taken before it?); berth state accept-restore records it failed")
		return false
	}
	if err != nil {
		return true // etcd cannot say now: keep the result and ask again
	}
	if j.State != api.JobRunning {
		log.Warn("job result not recorded: the leader that took over ended the job first, its result stands",
			"state", j.State, "reason", j.Reason)
		return false
	}
	return true
}

// recycleAndRelease resets the instance and gives key's slot back. A reset
// that did not succeed (an error, a timeout, a hung plugin) never hands the
// instance to another job: it is deleted instead, whatever the provider did
// (issue 19). The slot stays held until then, so no job is booked there in
// between.
func (m *Manager) recycleAndRelease(ctx context.Context, f *fleet.Fleet, log *slog.Logger, key, id string) {
	if err := m.recycle(ctx, log, id); err != nil {
		why := "reset between jobs failed: " + err.Error()
		log.Error("instance reset failed; deleting the instance so no other job sees what this job left", "instance", id, "err", err)
		if derr := f.Discard(key, why); derr != nil {
			log.Error("discard instance after a failed reset", "instance", id, "err", derr)
		}
		return
	}
	_ = f.Release(key)
}

// canRecycle says whether berth resets instances between jobs: the
// provider can, and one job at a time runs on an instance.
func (m *Manager) canRecycle() bool {
	_, ok := m.prov.(provider.Recycler)
	return ok && m.info.Capabilities.Recycle && m.cfg.Autoscaler.CapacityPerInstance == 1
}

// recycle asks the provider to wipe what the job left on its instance before
// the slot takes another job, within autoscaler.reset_timeout. With several
// slots per instance other jobs may still run there, so jobs share the
// instance as they share its slots and nothing is wiped. The error is the
// caller's to act on: an instance whose reset did not succeed must take no
// other job. Capabilities.Recycle decides, not the type alone: a plugin
// group always has the method, whether or not its plugin can recycle.
func (m *Manager) recycle(ctx context.Context, log *slog.Logger, id string) error {
	if !m.canRecycle() {
		return nil
	}
	r := m.prov.(provider.Recycler)
	timeout := m.cfg.Autoscaler.ResetTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	start := time.Now()
	err := r.Recycle(rctx, id)
	if err == nil {
		log.Debug("instance reset between jobs", "instance", id, "took", time.Since(start).Round(time.Millisecond))
		return nil
	}
	if rctx.Err() != nil {
		err = fmt.Errorf("no answer within reset_timeout %v: %w", timeout, err)
	}
	return err
}

// warnIsolatedGitLab warns when GitLab jobs will run in local sandboxes
// without network: they clone their repository over the network, which the
// local provider's default network = "isolated" does not give them.
func warnIsolatedGitLab(cfg *config.Config, log *slog.Logger) {
	if cfg.Autoscaler.Provider != "local" {
		return
	}
	var pc struct{ Network string }
	json.Unmarshal(cfg.Autoscaler.ProviderConfig, &pc)
	if pc.Network == "host" {
		return
	}
	for _, s := range cfg.Sources {
		if s.Kind == config.SourceGitLab {
			log.Warn(`GitLab jobs clone their repository over the network, but local sandboxes have none with network = "isolated" (the default); set network = "host" in [autoscaler.provider_config] (see docs/security-model.md), or GIT_STRATEGY: none for jobs that need no sources`, "source", s.String())
			return
		}
	}
}

// privatePaths lists what no instance may see: the state directory, the
// config file and every token file the config names.
func privatePaths(cfg *config.Config) []string {
	paths := []string{cfg.StateDir}
	for _, f := range []string{cfg.File, cfg.TLSCertFile, cfg.TLSKeyFile} {
		if f != "" {
			paths = append(paths, f)
		}
	}
	for _, src := range cfg.Sources {
		if src.TokenFile != "" {
			paths = append(paths, src.TokenFile)
		}
	}
	return paths
}

// checkEnvKey refuses a key minted by another berth state.
func (m *Manager) checkEnvKey(k string) error {
	if !strings.HasPrefix(k, m.store.ID()+"-") {
		return fmt.Errorf("environment key %q was not issued by this berth (its state id is %s); a key from another berth state cannot be resumed here", k, m.store.ID())
	}
	return nil
}

// startScript starts the job's script; an image job's runs to its end
// here (it is rare, and its path is deep anyway).
func (m *Manager) startScript(ctx context.Context, r *jobRun) waiter {
	r.run = m.startRun(ctx, r)
	if r.run.prepErr != nil {
		return ended{code: -1, err: r.run.prepErr}
	}
	if r.spec.Image != nil || len(r.spec.Services) > 0 {
		code, err := m.runInImage(r.run.ctx, &r.acq.Connect, &r.spec, &r.run.cmd)
		return ended{code: code, err: err}
	}
	return m.runner.Start(r.run.ctx, r.acq.Connect, r.run.cmd)
}

// waiter is a started script (executor.Running) or one that has ended.
type waiter interface {
	Wait() (int, error)
}

// ended is a script that has already ended, or never started.
type ended struct {
	code int
	err  error
}

func (e ended) Wait() (int, error) { return e.code, e.err }

// scriptRun is the state of a job's script while it runs (see startScript).
type scriptRun struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	unwatch  func()
	graceful atomic.Bool
	timeout  time.Duration
	cmd      executor.Command
	prepErr  error
}

// startRun sets up what execute needs while the script runs (its context,
// canceled when the instance is lost or the source cancels the job) and
// stages the job's files in (prepErr).
func (m *Manager) startRun(ctx context.Context, r *jobRun) *scriptRun {
	run := &scriptRun{timeout: r.spec.Timeout}
	if run.timeout <= 0 {
		run.timeout = m.cfg.JobTimeout
	}
	run.ctx, run.cancel = context.WithCancelCause(ctx)
	run.unwatch = watchRun(r.job, r.acq, run.cancel, &run.graceful)
	run.cmd = executor.Command{Script: r.spec.Script, Env: r.spec.Env, Output: r.job.Log(), Timeout: run.timeout}
	run.prepErr = m.prepare(run.ctx, r.job, r.acq)
	return run
}

func (run *scriptRun) stop() {
	run.unwatch()
	run.cancel(nil)
}

// defaultAfterScriptTimeout bounds an after_script whose job sets no
// other limit: gitlab-runner's AfterScriptTimeout.
const defaultAfterScriptTimeout = 5 * time.Minute

// endRun turns how the script ended into the job's result, runs the
// after_script and collects the job's artifacts.
func (m *Manager) endRun(ctx context.Context, r *jobRun, run *scriptRun, code int, err error) jobsource.Result {
	res := scriptResult(ctx, run, r.acq, code, err)
	spec := &r.spec
	// Not after the job's timeout: the timeout bounds the whole job, as in
	// gitlab-runner, whose after_script runs within the job's deadline.
	if spec.AfterScript != "" && (res.Failure != jobsource.FailureCanceled || run.graceful.Load()) && res.Failure != jobsource.FailureSystem &&
		res.Failure != jobsource.FailureImagePull && // no image, nothing to run it in
		res.Failure != jobsource.FailureTimeout {
		limit := spec.AfterScriptTimeout
		if limit <= 0 {
			limit = defaultAfterScriptTimeout
		}
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
		after := executor.Command{Script: spec.AfterScript, Env: spec.Env, Output: r.job.Log()}
		_, aerr := m.runScript(actx, &r.acq.Connect, spec, &after)
		acancel()
		if aerr != nil {
			fmt.Fprintf(r.job.Log(), "\nberth: after_script failed: %v\n", aerr)
		}
	}
	return m.collect(ctx, r.job, r.acq, res)
}

// scriptResult maps the script's exit code or error onto the job's result.
func scriptResult(ctx context.Context, run *scriptRun, acq fleet.Acquisition, code int, err error) jobsource.Result {
	res := jobsource.Result{ExitCode: code}
	cause := context.Cause(run.ctx)
	imageKind, imageMsg, imageErr := imageFailure(err)
	switch {
	case run.prepErr != nil && run.ctx.Err() == nil:
		res.Failure, res.Message = jobsource.FailureSystem, run.prepErr.Error()
	case err == nil && code == 0:
	case imageErr:
		res.ExitCode, res.Failure, res.Message = -1, imageKind, imageMsg
	case err == nil:
		res.Failure, res.Message = jobsource.FailureScript, fmt.Sprintf("script exited with code %d", code)
	case errors.Is(cause, errCanceled):
		res.ExitCode, res.Failure, res.Message = -1, jobsource.FailureCanceled, "job canceled"
	case acq.LostReason() != "":
		res.ExitCode, res.Failure = -1, jobsource.FailureSystem
		res.Message = fmt.Sprintf("instance %s was lost while the job ran: %s", acq.Instance, acq.LostReason())
	case errors.Is(err, executor.ErrTimeout):
		res.ExitCode, res.Failure, res.Message = -1, jobsource.FailureTimeout, fmt.Sprintf("job exceeded its timeout of %s", run.timeout)
	case errors.Is(err, executor.ErrCanceled) && ctx.Err() != nil:
		res.ExitCode, res.Failure, res.Message = -1, jobsource.FailureSystem, "berth stopped before the job finished (shutdown grace period over)"
	default:
		res.ExitCode, res.Failure, res.Message = -1, jobsource.FailureSystem, err.Error()
	}
	return res
}

var errCanceled = errors.New("job canceled by its source")

// watchRun cancels a job's run when its instance is lost or its source
// cancels it, until the returned stop is called. It registers callbacks
// rather than starting a goroutine to wait for either: such a goroutine
// would hold a stack for the job's whole run. Only a job that cannot call
// back (no jobsource.CancelWatcher; berth's queue and GitLab jobs can)
// gets one, for its cancel.
func watchRun(job jobsource.Job, acq fleet.Acquisition, cancel context.CancelCauseFunc, graceful *atomic.Bool) (stop func()) {
	stopLost := acq.AfterLost(func() {
		cancel(fmt.Errorf("instance %s was lost: %s", acq.Instance, acq.LostReason()))
	})
	canceled := func(c jobsource.CancelRequest) {
		graceful.Store(c.Graceful)
		cancel(errCanceled)
	}
	if w, ok := job.(jobsource.CancelWatcher); ok {
		stopCancel := w.AfterCancel(canceled)
		return func() { stopLost(); stopCancel() }
	}
	done := make(chan struct{})
	go func() {
		select {
		case c := <-job.Canceled():
			canceled(c)
		case <-done:
		}
	}()
	return func() { stopLost(); close(done) }
}

func resultLabel(r jobsource.Result) string {
	if r.Failure == jobsource.FailureNone {
		return "success"
	}
	return string(r.Failure)
}

func (o Options) finishRetryMax() time.Duration {
	if o.FinishRetryMax <= 0 {
		return 30 * time.Second
	}
	return o.FinishRetryMax
}
