// Package policy decides which scaling policy is active at a given instant.
//
// A policy says how large the warm pool should be (idle_count, scale_factor,
// ...). Users usually want different pools at different times — a big warm
// pool during office hours, nothing at night — so policies come in periods,
// each guarded by cron expressions evaluated in the period's time zone. This
// package turns a list of periods into a Schedule and answers "which policy is
// active at time t". It never reads the wall clock: the caller passes t, which
// keeps the scaler deterministic under simulated time.
package policy

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
)

// Policy is the sizing rule for the warm pool while its period is active.
// Counts are in slots, not instances (see docs/semantics.md, "Scaling").
type Policy struct {
	// IdleCount is the minimum number of idle slots kept ready.
	IdleCount int
	// IdleTime is how long an instance with no busy slot may stay idle before
	// it becomes a candidate for scale-in.
	IdleTime time.Duration
	// ScaleFactor adds ceil(ScaleFactor × in-use slots) idle slots on top of
	// demand, capped by ScaleFactorLimit; 0 disables it.
	ScaleFactor float64
	// ScaleFactorLimit caps what ScaleFactor may add.
	ScaleFactorLimit int
	// Preemptive means a job is booked only against an idle slot on a ready
	// instance; when false, booking starts provisioning (on-demand mode).
	Preemptive bool
	// SuspendedIdleTime turns on the suspended tier of idle capacity: a hot
	// idle instance past IdleTime is suspended instead of deleted, and a
	// suspended idle instance is deleted after SuspendedIdleTime. 0 disables
	// the tier (idle instances are deleted after IdleTime) unless TargetWait
	// is set, which turns it on with a keep time of its own. The tier needs a
	// provider with the suspend capability; without it the tier stays empty.
	SuspendedIdleTime time.Duration
	// SuspendedIdleCount is the least number of suspended idle instances
	// kept (in instances, not slots), a floor under what TargetWait chooses.
	SuspendedIdleCount int
	// TargetWait is the p95 wait for a slot the scaler aims at: it sizes the
	// hot and suspended pools from the learned arrival pattern at least cost
	// (see scaler's sizing). 0 leaves the pools at their floors
	// (IdleCount, SuspendedIdleCount).
	TargetWait time.Duration
}

// Period is a Policy together with when it applies.
type Period struct {
	// Periods lists standard 5-field cron expressions (minute hour
	// day-of-month month day-of-week) or descriptors such as "@daily". The
	// period is active during every minute at which any of them fires.
	Periods []string
	// Timezone is an IANA zone name ("Europe/Berlin") in which Periods are
	// evaluated; empty means UTC. "Local" is accepted but makes the schedule
	// depend on the host, which is rarely what a fleet wants.
	Timezone string
	// Policy applies while the period is active.
	Policy Policy
}

// FieldError reports one invalid field of a Period. Field is the
// configuration key of that field (for example "timezone" or "idle_count")
// so that the config package can point at the offending line; Item is the
// index within Periods when Field is "periods", else -1.
type FieldError struct {
	// Field is the config key of the field, e.g. "timezone".
	Field string
	// Item is the index in Periods for Field "periods", else -1.
	Item int
	// Value is the offending value, Go-formatted.
	Value string
	// Err says what is wrong and what to do.
	Err error
}

// Error implements error.
func (e *FieldError) Error() string {
	return fmt.Sprintf("%s = %s: %v", e.Field, e.Value, e.Err)
}

// Unwrap returns the underlying cause.
func (e *FieldError) Unwrap() error { return e.Err }

// cronParser accepts the classic 5-field crontab syntax and descriptors. The
// seconds field is left out on purpose: a policy applies per minute.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron validates one cron expression as used in Period.Periods.
//
// "TZ=" / "CRON_TZ=" prefixes are refused because the zone belongs in
// Period.Timezone (and robfig/cron panics on a prefix without a space), and
// "@every" is refused because it describes an interval, not calendar minutes.
func ParseCron(spec string) (*cron.SpecSchedule, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, errors.New("empty cron expression; use \"* * * * *\" for always")
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, errors.New("time zone prefixes are not supported here; set timezone on the period instead")
	}
	if strings.HasPrefix(s, "@every") {
		return nil, errors.New("@every describes an interval, not a time of day; use a 5-field cron expression")
	}
	sched, err := cronParser.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("invalid cron expression: %v (fields: minute hour day-of-month month day-of-week)", err)
	}
	spec5, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, errors.New("unsupported cron expression; use a 5-field cron expression")
	}
	return spec5, nil
}

// ProfileZone is the time zone a learned arrival profile counts its hours
// in: that of the first period that sets TargetWait (the profile sizes its
// pools), else of the first period; UTC when there is none. A team's hours
// are local hours, so a profile in their zone keeps them across a
// daylight-saving change.
func ProfileZone(periods []Period) (*time.Location, error) {
	if len(periods) == 0 {
		return time.UTC, nil
	}
	p := periods[0]
	for _, q := range periods {
		if q.Policy.TargetWait > 0 {
			p = q
			break
		}
	}
	return LoadTimezone(p.Timezone)
}

// LoadTimezone resolves a Period.Timezone value; empty means UTC.
func LoadTimezone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q; use an IANA name such as \"Europe/Berlin\" or \"UTC\"", name)
	}
	return loc, nil
}

// Validate checks every field of p and returns all problems found, joined
// with errors.Join; each one is a *FieldError.
func (p Period) Validate() error {
	_, err := compile(p)
	return err
}

// compiled is a validated Period ready for fast matching.
type compiled struct {
	specs  []*cron.SpecSchedule
	loc    *time.Location
	policy Policy
}

func compile(p Period) (compiled, error) {
	var errs []error
	add := func(field string, item int, value string, err error) {
		errs = append(errs, &FieldError{Field: field, Item: item, Value: value, Err: err})
	}
	c := compiled{policy: p.Policy}
	if len(p.Periods) == 0 {
		add("periods", -1, "[]", errors.New("no cron expressions; use [\"* * * * *\"] for always"))
	}
	for i, spec := range p.Periods {
		s, err := ParseCron(spec)
		if err != nil {
			add("periods", i, fmt.Sprintf("%q", spec), err)
			continue
		}
		c.specs = append(c.specs, s)
	}
	loc, err := LoadTimezone(p.Timezone)
	if err != nil {
		add("timezone", -1, fmt.Sprintf("%q", p.Timezone), err)
	}
	c.loc = loc
	pol := p.Policy
	if pol.IdleCount < 0 {
		add("idle_count", -1, fmt.Sprint(pol.IdleCount), errors.New("must be 0 or more"))
	}
	if pol.IdleTime < 0 {
		add("idle_time", -1, fmt.Sprintf("%q", pol.IdleTime.String()), errors.New("must not be negative"))
	}
	if pol.ScaleFactor < 0 || math.IsNaN(pol.ScaleFactor) || math.IsInf(pol.ScaleFactor, 0) {
		add("scale_factor", -1, fmt.Sprint(pol.ScaleFactor), errors.New("must be a finite number, 0 or more"))
	}
	if pol.ScaleFactorLimit < 0 {
		add("scale_factor_limit", -1, fmt.Sprint(pol.ScaleFactorLimit), errors.New("must be 0 or more"))
	}
	if pol.SuspendedIdleTime < 0 {
		add("suspended_idle_time", -1, fmt.Sprintf("%q", pol.SuspendedIdleTime.String()), errors.New("must not be negative"))
	}
	if pol.SuspendedIdleCount < 0 {
		add("suspended_idle_count", -1, fmt.Sprint(pol.SuspendedIdleCount), errors.New("must be 0 or more"))
	}
	if pol.TargetWait < 0 {
		add("target_wait", -1, fmt.Sprintf("%q", pol.TargetWait.String()), errors.New("must not be negative"))
	}
	return c, errors.Join(errs...)
}

// Schedule answers which Policy is active at an instant. Build it with
// NewSchedule. It is safe for concurrent use: the per-minute cache is an
// atomically swapped pointer, so concurrent callers at worst compute the same
// answer twice.
type Schedule struct {
	periods []compiled
	cache   atomic.Pointer[cacheEntry]
}

// cacheEntry remembers the answer for one UTC minute. Every zone in use since
// 1972 has a whole-minute UTC offset, so a UTC minute is also a wall-clock
// minute in each period's zone; zones with historical second offsets (LMT)
// could see a stale answer for under a minute, which is harmless.
type cacheEntry struct {
	minute int64
	policy Policy
}

// NewSchedule validates periods and returns a Schedule over them. Errors name
// the period by index ("period 2: timezone = ...") and wrap *FieldError. At
// least one period is required: with none there is no answer to give, and the
// config package supplies a default period itself.
func NewSchedule(periods []Period) (*Schedule, error) {
	if len(periods) == 0 {
		return nil, errors.New("no policy periods; give at least one")
	}
	s := &Schedule{periods: make([]compiled, 0, len(periods))}
	var errs []error
	for i, p := range periods {
		c, err := compile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("period %d: %w", i, err))
			continue
		}
		s.periods = append(s.periods, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// At returns the policy active during the minute that contains t: the last
// period (in configuration order, so later periods override earlier ones,
// as in GitLab Runner) with a cron expression that fires at that minute in the
// period's time zone. When no period matches, the first period's policy
// applies: the first period is conventionally the catch-all baseline, and a
// schedule must always yield some policy.
//
// At is pure with respect to t (it never reads the clock) and costs one
// atomic load and a compare when called again within the same minute.
func (s *Schedule) At(t time.Time) Policy {
	m := floorDiv(t.Unix(), 60)
	if e := s.cache.Load(); e != nil && e.minute == m {
		return e.policy
	}
	p := s.lookup(t)
	s.cache.Store(&cacheEntry{minute: m, policy: p})
	return p
}

// Active returns the index of the period whose policy At returns for t; the
// scaler can expose it as a metric so operators see which period is in force.
func (s *Schedule) Active(t time.Time) int {
	for i := len(s.periods) - 1; i >= 0; i-- {
		if s.periods[i].matches(t) {
			return i
		}
	}
	return 0
}

func (s *Schedule) lookup(t time.Time) Policy {
	return s.periods[s.Active(t)].policy
}

func (c *compiled) matches(t time.Time) bool {
	wall := t.In(c.loc)
	for _, spec := range c.specs {
		if specMatches(spec, wall) {
			return true
		}
	}
	return false
}

// starBit is robfig/cron's marker for a field written as "*" or "?"; it
// changes how day-of-month and day-of-week combine. It is unexported there,
// so it is mirrored here and a test cross-checks specMatches against
// cron's own Next.
const starBit = 1 << 63

// specMatches reports whether spec fires at the wall-clock minute of t (t is
// already in the period's zone). It reads the wall-clock fields directly
// instead of calling Next, so that ambiguous and skipped minutes around DST
// changes behave predictably: a repeated wall-clock minute matches both
// times, and a skipped one never occurs.
func specMatches(spec *cron.SpecSchedule, t time.Time) bool {
	if spec.Minute&(1<<uint(t.Minute())) == 0 ||
		spec.Hour&(1<<uint(t.Hour())) == 0 ||
		spec.Month&(1<<uint(t.Month())) == 0 {
		return false
	}
	dom := spec.Dom&(1<<uint(t.Day())) != 0
	dow := spec.Dow&(1<<uint(t.Weekday())) != 0
	// Vixie cron rule: if either day field is restricted-by-star, both must
	// match; if both are restricted, either may match.
	if spec.Dom&starBit != 0 || spec.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
