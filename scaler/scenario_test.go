package scaler_test

// Scenario tests: testdata/*.txt drive a Scaler directly with a scripted
// provider listing, one command per block, and record what the core decided.
// They are meant to be read like the scenario they check; see
// testdata/README.txt for the command language. Rewrite the expected output
// with: go test ./scaler/ -run TestScenarios -rewrite

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
)

// epoch is a Monday, so weekday cron periods read naturally in scenarios.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.HasSuffix(path, "README.txt") || strings.Contains(path, "forecast/") {
			return // testdata/forecast is TestForecastScenarios'
		}
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := h.run(d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			if h.s != nil {
				if err := h.s.CheckForTest(); err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
			}
			return out
		})
	})
}

type harness struct {
	cfg   scaler.Config
	s     *scaler.Scaler
	now   time.Time
	store []byte // the last persisted State, as JSON
	// taken counts jobs taken (only ever after a successful Reserve); failed
	// counts Failed and Lost actions delivered to them.
	taken, failed, refused int
	listing                []scaler.Listed
}

func (h *harness) run(d *datadriven.TestData) (string, error) {
	var b strings.Builder
	if d.Cmd != "new" && d.Cmd != "restart" && h.s == nil {
		return "", errors.New("run new first")
	}
	args := map[string]string{}
	var pos []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			pos = append(pos, a.Key)
		} else {
			args[a.Key] = strings.Join(a.Vals, ",")
		}
	}
	switch d.Cmd {
	case "new":
		cfg, err := parseConfig(args, pos, d.Input)
		if err != nil {
			return "", err
		}
		h.cfg, h.now = cfg, epoch
		h.s = scaler.New(cfg, h.now)
	case "advance":
		dur, err := time.ParseDuration(pos[0])
		if err != nil {
			return "", err
		}
		h.now = h.now.Add(dur)
		h.s.Advance(h.now)
		fmt.Fprintf(&b, "now %s\n", h.now.Sub(epoch))
		if _, ok := args["tick"]; ok || hasPos(pos, "tick") {
			h.s.Tick()
		}
	case "tick":
		h.s.Tick()
	case "reserve":
		for _, k := range pos {
			if err := h.s.Reserve(k); err != nil {
				var nc *scaler.NoCapacityError
				if errors.As(err, &nc) {
					h.refused++
				}
				fmt.Fprintf(&b, "%s: %v\n", k, err)
				continue
			}
			fmt.Fprintf(&b, "%s: booked\n", k)
		}
	case "poll":
		// poll K...: a long-poll books before it asks the source for a job.
		for _, k := range pos {
			if err := h.s.ReservePoll(k); err != nil {
				var nc *scaler.NoCapacityError
				if errors.As(err, &nc) {
					h.refused++
				}
				fmt.Fprintf(&b, "%s: %v\n", k, err)
				continue
			}
			fmt.Fprintf(&b, "%s: polling\n", k)
		}
	case "promote":
		// promote K...: the poll returned a job; its booking becomes demand.
		for _, k := range pos {
			fmt.Fprintf(&b, "%s: %s\n", k, errOr(h.s.Promote(k), "promoted"))
		}
	case "jobs":
		// jobs n=30 prefix=j [every=1s]: n job loops each book first and take
		// a job (and call Acquire) only when the booking succeeded; with
		// every, one job arrives per that much time.
		n, _ := strconv.Atoi(args["n"])
		prefix := args["prefix"]
		every, _ := time.ParseDuration(args["every"])
		var booked, refusedTyped, refusedOther, bound, waiting int
		for i := 1; i <= n; i++ {
			if every > 0 && i > 1 {
				h.now = h.now.Add(every)
				h.s.Advance(h.now)
			}
			k := fmt.Sprintf("%s%d", prefix, i)
			if err := h.s.Reserve(k); err != nil {
				var nc *scaler.NoCapacityError
				if errors.As(err, &nc) && errors.Is(err, scaler.ErrNoCapacity) {
					refusedTyped++
					h.refused++
				} else {
					refusedOther++
				}
				continue
			}
			booked++
			h.taken++
			_, ok, err := h.s.Acquire(k)
			switch {
			case err != nil:
				return "", err
			case ok:
				bound++
			default:
				waiting++
			}
		}
		fmt.Fprintf(&b, "booked=%d (bound=%d waiting=%d) refused: no-capacity=%d other=%d\n", booked, bound, waiting, refusedTyped, refusedOther)
	case "unreserve":
		for _, k := range pos {
			fmt.Fprintf(&b, "%s: %s\n", k, errOr(h.s.Unreserve(k), "unreserved"))
		}
	case "acquire":
		for _, k := range pos {
			id, ok, err := h.s.Acquire(k)
			switch {
			case err != nil:
				fmt.Fprintf(&b, "%s: %v\n", k, err)
			case ok:
				h.taken++
				fmt.Fprintf(&b, "%s: acquired %s\n", k, id)
			default:
				h.taken++
				fmt.Fprintf(&b, "%s: waiting\n", k)
			}
		}
	case "why":
		fmt.Fprintf(&b, "%s\n", h.s.Why(pos[0]))
	case "going":
		// going ID why...: a provider call said the cloud is deleting ID.
		h.s.Going(pos[0], strings.Join(pos[1:], " "))
	case "connected":
		// connected K ID: K's job has ID's connection details (Connected).
		fmt.Fprintf(&b, "%s: %s\n", pos[0], errOr(h.s.Connected(pos[0], pos[1]), "connected to "+pos[1]))
	case "delete-instance":
		// delete-instance ID... [force]
		force := hasPos(pos, "force")
		for _, id := range pos {
			if id == "force" {
				continue
			}
			outcome, why, err := h.s.DeleteInstance(id, force)
			fmt.Fprintf(&b, "%s: %s\n", id, errOr(err, strings.TrimSuffix(outcome+": "+why, ": ")))
		}
	case "queued":
		n, err := strconv.Atoi(pos[0])
		if err != nil {
			return "", err
		}
		h.s.Queued(n)
	case "requested":
		n, err := strconv.Atoi(pos[0])
		if err != nil {
			return "", err
		}
		h.s.ObserveRequested(n)
	case "release":
		if prefix, ok := args["prefix"]; ok {
			// release prefix=j n=30 ends the jobs j1..j30.
			n, _ := strconv.Atoi(args["n"])
			released := 0
			for i := 1; i <= n; i++ {
				if h.s.Release(fmt.Sprintf("%s%d", prefix, i)) == nil {
					released++
				}
			}
			fmt.Fprintf(&b, "released %d\n", released)
			break
		}
		for _, k := range pos {
			fmt.Fprintf(&b, "%s: %s\n", k, errOr(h.s.Release(k), "released"))
		}
	case "suspend":
		// suspend k1 env=e1 [state=...]
		st := args["state"]
		if st == "" {
			st = "state-of-" + args["env"]
		}
		fmt.Fprintf(&b, "%s: %s\n", pos[0], errOr(h.s.Suspend(pos[0], args["env"], []byte(st)), "suspended as "+args["env"]))
	case "resume":
		// resume e1 as=k2
		err := h.s.Resume(pos[0], args["as"])
		if err != nil {
			var lost *scaler.EnvLostError
			if errors.As(err, &lost) {
				fmt.Fprintf(&b, "EnvLostError: ")
			}
		} else {
			h.taken++
		}
		fmt.Fprintf(&b, "%s: %s\n", pos[0], errOr(err, "resuming for "+args["as"]))
	case "list":
		h.listing = h.listing[:0]
		for _, a := range d.CmdArgs {
			if len(a.Vals) != 1 || !provider.State(a.Vals[0]).Valid() {
				return "", fmt.Errorf("list wants id=state, got %s", a)
			}
			h.listing = append(h.listing, scaler.Listed{ID: a.Key, State: provider.State(a.Vals[0])})
		}
		h.s.Observe(h.listing)
	case "increase-result":
		req, _ := strconv.Atoi(args["requested"])
		cr, _ := strconv.Atoi(args["created"])
		h.s.IncreaseResult(req, cr, errArg(args))
	case "decrease-result":
		h.s.DecreaseResult(pos, errArg(args))
	case "hook":
		h.s.HookResult(pos[0], errArg(args))
	case "heartbeat":
		h.s.HeartbeatResult(pos[0], errArg(args))
	case "suspend-result":
		h.s.SuspendResult(pos[0], errArg(args))
	case "resume-result":
		h.s.ResumeResult(pos[0], errArg(args))
	case "delete-all":
		h.s.DeleteAll(scaler.ReasonShutdown)
	case "hold":
		// hold [off]: the operator's --hold, or its release.
		h.s.Hold(!hasPos(pos, "off"))
	case "stop-scale-up":
		h.s.StopScaleUp()
	case "crash":
		// The process dies: only what was persisted survives.
		h.persist()
		h.s = nil
		fmt.Fprintf(&b, "crashed; store holds %d bytes\n", len(h.store))
		return b.String(), nil
	case "restart":
		if h.s != nil {
			h.persist()
		}
		if d, ok := args["config"]; ok {
			// restart config=delete-dead,... changes settings across the restart.
			cfg, err := parseConfig(nil, strings.Split(d, ","), "")
			if err != nil {
				return "", err
			}
			cfg.Policies = h.cfg.Policies
			cfg.CapacityPerInstance, cfg.MaxInstances = h.cfg.CapacityPerInstance, h.cfg.MaxInstances
			cfg.CanSuspend, cfg.MaxUseCount = h.cfg.CanSuspend, h.cfg.MaxUseCount
			h.cfg = cfg
		}
		var st scaler.State
		if hasPos(pos, "empty") {
			// restart empty: the store was lost (or never existed).
			h.store = nil
		} else if err := json.Unmarshal(h.store, &st); err != nil {
			return "", err
		}
		s, dead, err := scaler.Restore(h.cfg, st, h.now)
		if err != nil {
			return "", err
		}
		h.s = s
		for _, dj := range dead {
			fmt.Fprintf(&b, "dead job %s on %s\n", dj.Key, dj.InstanceID)
		}
		fmt.Fprintf(&b, "restored %d instances, %d environments, %d pending\n", len(st.Instances), len(st.Envs), len(st.Pending))
	case "ready", "show":
	default:
		return "", fmt.Errorf("unknown command %q", d.Cmd)
	}
	h.drain(&b)
	if d.Cmd == "show" {
		h.show(&b)
	} else {
		h.summary(&b)
	}
	return b.String(), nil
}

func hasPos(pos []string, s string) bool {
	for _, p := range pos {
		if p == s {
			return true
		}
	}
	return false
}

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func errArg(args map[string]string) error {
	if e, ok := args["err"]; ok {
		return errors.New(e)
	}
	return nil
}

// persist is what the caller does when Ready says the state is dirty.
func (h *harness) persist() {
	b, err := json.Marshal(h.s.State())
	if err != nil {
		panic(err)
	}
	h.store = b
}

// drain prints and carries out (on paper) the actions from Ready, after
// persisting the state as a real caller must.
func (h *harness) drain(b *strings.Builder) {
	acts, dirty := h.s.Ready()
	if dirty {
		h.persist()
	}
	for _, a := range acts {
		b.WriteString(fmtAction(a))
		b.WriteByte('\n')
		switch a := a.(type) {
		case scaler.Failed, scaler.Lost:
			h.failed++
		case scaler.Decrease:
			if a.Reason == "" {
				b.WriteString("!!! I8 violated: decrease without reason\n")
			}
		}
	}
}

func fmtAction(a scaler.Action) string {
	switch a := a.(type) {
	case scaler.Increase:
		return fmt.Sprintf("> increase %d", a.N)
	case scaler.Decrease:
		return fmt.Sprintf("> decrease %s (%s)", a.ID, a.Reason)
	case scaler.Suspend:
		return fmt.Sprintf("> suspend %s", a.ID)
	case scaler.Resume:
		return fmt.Sprintf("> resume %s", a.ID)
	case scaler.RunReadyHook:
		if a.Reset {
			return fmt.Sprintf("> reset %s", a.ID)
		}
		return fmt.Sprintf("> run-ready-hook %s", a.ID)
	case scaler.Heartbeat:
		return fmt.Sprintf("> heartbeat %s", a.ID)
	case scaler.Bound:
		if a.State != nil {
			return fmt.Sprintf("> bound %s -> %s state=%q", a.Key, a.InstanceID, a.State)
		}
		return fmt.Sprintf("> bound %s -> %s", a.Key, a.InstanceID)
	case scaler.Failed:
		kind := fmt.Sprintf("%T", a.Err)
		return fmt.Sprintf("> failed %s (%s): %v", a.Key, kind, a.Err)
	case scaler.Lost:
		return fmt.Sprintf("> lost %s on %s: %s", a.Key, a.InstanceID, a.Reason)
	case scaler.Moved:
		return fmt.Sprintf("> moved %s off %s: %s", a.Key, a.From, a.Reason)
	case scaler.Gone:
		return fmt.Sprintf("> gone %s (%s) after %s", a.ID, a.Reason, a.Lifetime)
	case scaler.Scaled:
		s := fmt.Sprintf("> scaled %s: in_use=%d idle_slots=%d have=%d want=%d n=%d", a.Direction, a.InUse, a.IdleSlots, a.Have, a.Want, a.N)
		if a.Tier {
			s += fmt.Sprintf(" suspended=%d/%d", a.Suspended, a.SuspendedTarget)
		}
		return s
	case scaler.Sized:
		return fmt.Sprintf("> sized hot=%d suspended=%d tier=%v (rate=%.3f/s burst=%.0f from %s; boot %s, resume %s, target %s;"+
			" refill trust %.3f within %s; keep %s, %.0f deep)",
			a.Hot, a.Suspended, a.Tier, a.Rate, a.Burst, a.Source, a.BootTime, a.ResumeTime, a.TargetWait,
			a.RefillTrust, a.RefillHorizon, a.Keep, a.Drain) + map[bool]string{true: " keeping all surplus"}[a.KeepAll]
	case scaler.InstanceReady:
		return fmt.Sprintf("> ready %s after %s", a.ID, a.After)
	}
	return fmt.Sprintf("> %T %+v", a, a)
}

func (h *harness) summary(b *strings.Builder) {
	c := h.s.Counts()
	fmt.Fprintf(b, "= in_use=%d total=%d pending=%d", h.s.InUse(), h.s.Total(), c.Pending)
	if c.Polls > 0 {
		fmt.Fprintf(b, " polls=%d", c.Polls)
	}
	var phases []string
	for p, n := range c.InstancesByPhase {
		if n > 0 {
			phases = append(phases, fmt.Sprintf("%s=%d", p, n))
		}
	}
	sort.Strings(phases)
	if len(phases) > 0 {
		fmt.Fprintf(b, " [%s]", strings.Join(phases, " "))
	}
	b.WriteByte('\n')
}

func (h *harness) show(b *strings.Builder) {
	for _, v := range h.s.Instances() {
		var slots []string
		for _, k := range []string{scaler.SlotIdle, scaler.SlotReserved, scaler.SlotAcquired, scaler.SlotSuspended, scaler.SlotUnavailable} {
			if n := v.Slots[k]; n > 0 {
				slots = append(slots, fmt.Sprintf("%s=%d", k, n))
			}
		}
		fmt.Fprintf(b, "%s %s uses=%d slots: %s", v.ID, v.Phase, v.UseCount, strings.Join(slots, " "))
		if v.Env != "" {
			fmt.Fprintf(b, " env=%s", v.Env)
		}
		if v.DeleteReason != "" {
			fmt.Fprintf(b, " delete_reason=%s", v.DeleteReason)
		}
		b.WriteByte('\n')
	}
	for _, k := range h.s.Environments() {
		inst, lost, by, _ := h.s.EnvForTest(k)
		fmt.Fprintf(b, "env %s on %s", k, inst)
		if by != "" {
			fmt.Fprintf(b, " resumed by %s", by)
		}
		if lost != "" {
			fmt.Fprintf(b, " LOST: %s", lost)
		}
		b.WriteByte('\n')
	}
	c := h.s.Counts()
	rc := h.s.RecountForTest()
	fmt.Fprintf(b, "in_use=%d idle_target=%d desired=%d have=%d total=%d pending=%d unbound=%d\n",
		h.s.InUse(), rc.IdleTarget, rc.Desired, rc.Have, h.s.Total(), c.Pending, c.Unbound)
	fmt.Fprintf(b, "jobs taken=%d failed=%d; bookings refused=%d\n", h.taken, h.failed, h.refused)
}

// parseConfig reads `new` arguments:
//
//	capacity=N max=N max-use=N idle=N idle-time=D scale=F limit=N
//	mode=on-demand|preemptive throttle=R burst=N hook heartbeat=D
//	threshold=N suspend env-ttl=D delete-unknown delete-dead reset-adopted disposable
//	ready-timeout=D listing-timeout=D suspended-idle-time=D
//	suspended-count=N target-wait=D suspended-cost=F boot-estimate=D
//	resume-estimate=D
//
// Input lines, if any, are policy periods: "<5 cron fields> | idle=N ...".
func parseConfig(args map[string]string, flags []string, input string) (scaler.Config, error) {
	var cfg scaler.Config
	pol, err := parsePolicy(args, policy.Policy{IdleCount: 1, IdleTime: 20 * time.Minute, Preemptive: true})
	if err != nil {
		return cfg, err
	}
	cfg.Policies = scaler.FixedPolicy(pol)
	for k, v := range args {
		var err error
		switch k {
		case "capacity":
			cfg.CapacityPerInstance, err = strconv.Atoi(v)
		case "max":
			cfg.MaxInstances, err = strconv.Atoi(v)
		case "max-use":
			cfg.MaxUseCount, err = strconv.Atoi(v)
		case "throttle":
			cfg.ThrottleLimit, err = strconv.ParseFloat(v, 64)
		case "burst":
			cfg.ThrottleBurst, err = strconv.Atoi(v)
		case "heartbeat":
			cfg.HeartbeatInterval, err = time.ParseDuration(v)
		case "threshold":
			cfg.FailureThreshold, err = strconv.Atoi(v)
		case "env-ttl":
			cfg.EnvTTL, err = time.ParseDuration(v)
		case "ready-timeout":
			cfg.ReadyTimeout, err = time.ParseDuration(v)
		case "listing-timeout":
			cfg.ListingTimeout, err = time.ParseDuration(v)
		case "suspended-cost":
			cfg.SuspendedCost, err = strconv.ParseFloat(v, 64)
		case "boot-estimate":
			cfg.BootTimeEstimate, err = time.ParseDuration(v)
		case "resume-estimate":
			cfg.ResumeTimeEstimate, err = time.ParseDuration(v)
		case "idle", "idle-time", "scale", "limit", "mode", "suspended-idle-time", "suspended-count", "target-wait":
		default:
			return cfg, fmt.Errorf("unknown setting %q", k)
		}
		if err != nil {
			return cfg, fmt.Errorf("%s: %v", k, err)
		}
	}
	for _, f := range flags {
		switch f {
		case "hook":
			cfg.ReadyHook = true
		case "suspend":
			cfg.CanSuspend = true
		case "delete-unknown":
			cfg.DeleteUnknown = true
		case "reset-adopted":
			cfg.ResetAdopted = true
		case "disposable":
			cfg.Disposable = true
		case "delete-dead":
			cfg.DeleteOnDeadJob = true
		case "confirm-connect":
			cfg.ConfirmConnect = true
		default:
			return cfg, fmt.Errorf("unknown flag %q", f)
		}
	}
	if strings.TrimSpace(input) != "" {
		var periods []policy.Period
		for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
			spec, rest, _ := strings.Cut(line, "|")
			pargs := map[string]string{}
			for _, f := range strings.Fields(rest) {
				k, v, _ := strings.Cut(f, "=")
				pargs[k] = v
			}
			p, err := parsePolicy(pargs, pol)
			if err != nil {
				return cfg, err
			}
			periods = append(periods, policy.Period{Periods: []string{strings.TrimSpace(spec)}, Policy: p})
		}
		sched, err := policy.NewSchedule(periods)
		if err != nil {
			return cfg, err
		}
		cfg.Policies = sched
	}
	return cfg, nil
}

func parsePolicy(args map[string]string, p policy.Policy) (policy.Policy, error) {
	var err error
	for k, v := range args {
		switch k {
		case "idle":
			p.IdleCount, err = strconv.Atoi(v)
		case "idle-time":
			p.IdleTime, err = time.ParseDuration(v)
		case "scale":
			p.ScaleFactor, err = strconv.ParseFloat(v, 64)
		case "limit":
			p.ScaleFactorLimit, err = strconv.Atoi(v)
		case "suspended-idle-time":
			p.SuspendedIdleTime, err = time.ParseDuration(v)
		case "suspended-count":
			p.SuspendedIdleCount, err = strconv.Atoi(v)
		case "target-wait":
			p.TargetWait, err = time.ParseDuration(v)
		case "mode":
			switch v {
			case "on-demand":
				p.Preemptive = false
			case "preemptive":
				p.Preemptive = true
			default:
				err = fmt.Errorf("mode is on-demand or preemptive, not %q", v)
			}
		}
		if err != nil {
			return p, fmt.Errorf("%s: %v", k, err)
		}
	}
	return p, nil
}
