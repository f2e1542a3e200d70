package policy

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func mustSchedule(t *testing.T, periods ...Period) *Schedule {
	t.Helper()
	s, err := NewSchedule(periods)
	if err != nil {
		t.Fatalf("NewSchedule: %v", err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

var (
	base     = Period{Periods: []string{"* * * * *"}, Policy: Policy{IdleCount: 1, IdleTime: 20 * time.Minute, Preemptive: true}}
	business = Policy{IdleCount: 10, IdleTime: time.Hour, ScaleFactor: 0.5, ScaleFactorLimit: 20, Preemptive: true}
)

func TestBusinessHoursBerlinVersusUTC(t *testing.T) {
	berlin := mustSchedule(t, base, Period{
		Periods:  []string{"* 8-17 * * mon-fri"},
		Timezone: "Europe/Berlin",
		Policy:   business,
	})
	inUTC := mustSchedule(t, base, Period{
		Periods:  []string{"* 8-17 * * mon-fri"},
		Timezone: "UTC",
		Policy:   business,
	})
	tests := []struct {
		at            string
		berlin, inUTC bool // whether the business policy is active
		why           string
	}{
		{"2024-01-15T07:30:00Z", true, false, "Monday 08:30 CET is 07:30 UTC"},
		{"2024-01-15T16:59:59Z", true, true, "Monday 17:59 CET, 16:59 UTC"},
		{"2024-01-15T17:00:00Z", false, true, "Monday 18:00 CET is past hour 17"},
		{"2024-07-15T06:00:00Z", true, false, "Monday 08:00 CEST is 06:00 UTC in summer"},
		{"2024-07-15T15:30:00Z", true, true, "Monday 17:30 CEST"},
		{"2024-07-15T16:30:00Z", false, true, "Monday 18:30 CEST"},
		{"2024-01-13T10:00:00Z", false, false, "Saturday"},
		{"2024-01-14T23:30:00Z", false, false, "Monday 00:30 CET, Sunday in UTC"},
		{"2024-01-15T05:30:00Z", false, false, "Monday 06:30 CET, too early"},
	}
	for _, tt := range tests {
		at := utc(tt.at)
		if got := berlin.At(at) == business; got != tt.berlin {
			t.Errorf("%s (%s): Berlin schedule business=%v, want %v", tt.at, tt.why, got, tt.berlin)
		}
		if got := inUTC.At(at) == business; got != tt.inUTC {
			t.Errorf("%s (%s): UTC schedule business=%v, want %v", tt.at, tt.why, got, tt.inUTC)
		}
	}
}

func TestLastMatchWins(t *testing.T) {
	a := Policy{IdleCount: 2}
	b := Policy{IdleCount: 3}
	s := mustSchedule(t, base,
		Period{Periods: []string{"* 9-17 * * *"}, Policy: a},
		Period{Periods: []string{"* 12 * * *"}, Policy: b},
	)
	for _, tt := range []struct {
		at   string
		want Policy
	}{
		{"2024-05-01T08:00:00Z", base.Policy},
		{"2024-05-01T09:00:00Z", a},
		{"2024-05-01T12:30:00Z", b}, // both match; the later one wins
		{"2024-05-01T13:00:00Z", a},
		{"2024-05-01T18:00:00Z", base.Policy},
	} {
		if got := s.At(utc(tt.at)); got != tt.want {
			t.Errorf("At(%s) = %+v, want %+v", tt.at, got, tt.want)
		}
	}
	// Order matters: with the narrow period first the broad one shadows it.
	s2 := mustSchedule(t, base,
		Period{Periods: []string{"* 12 * * *"}, Policy: b},
		Period{Periods: []string{"* 9-17 * * *"}, Policy: a},
	)
	if got := s2.At(utc("2024-05-01T12:30:00Z")); got != a {
		t.Errorf("reordered: got %+v, want %+v", got, a)
	}
}

func TestNoMatchUsesFirstPeriod(t *testing.T) {
	first := Policy{IdleCount: 7}
	s := mustSchedule(t,
		Period{Periods: []string{"0 0 1 1 *"}, Policy: first}, // only New Year's midnight
		Period{Periods: []string{"* 9 * * *"}, Policy: Policy{IdleCount: 9}},
	)
	if got := s.At(utc("2024-05-01T03:00:00Z")); got != first {
		t.Errorf("got %+v, want first period's %+v", got, first)
	}
	if got := s.Active(utc("2024-05-01T09:10:00Z")); got != 1 {
		t.Errorf("Active = %d, want 1", got)
	}
}

func TestMultipleExpressionsInOnePeriod(t *testing.T) {
	night := Policy{IdleCount: 0}
	s := mustSchedule(t, base, Period{Periods: []string{"* 0-6 * * *", "* 22-23 * * *"}, Policy: night})
	for at, want := range map[string]Policy{
		"2024-05-01T03:00:00Z": night,
		"2024-05-01T23:59:00Z": night,
		"2024-05-01T12:00:00Z": base.Policy,
	} {
		if got := s.At(utc(at)); got != want {
			t.Errorf("At(%s) = %+v, want %+v", at, got, want)
		}
	}
}

func TestDST(t *testing.T) {
	two := Policy{IdleCount: 2}
	s := mustSchedule(t, base, Period{Periods: []string{"* 2 * * *"}, Timezone: "Europe/Berlin", Policy: two})
	half := mustSchedule(t, base, Period{Periods: []string{"30 2 * * *"}, Timezone: "Europe/Berlin", Policy: two})

	// Spring forward, 2024-03-31: 02:00 CET jumps to 03:00 CEST; hour 2 never
	// happens in Berlin, so the period is never active that night.
	for m := utc("2024-03-30T23:00:00Z"); m.Before(utc("2024-03-31T03:00:00Z")); m = m.Add(time.Minute) {
		if got := s.At(m); got == two {
			t.Fatalf("spring forward: %s (%s Berlin) matched hour 2", m, m.In(berlinLoc(t)))
		}
	}
	// The day before, hour 2 CET is 01:00–01:59 UTC.
	if got := s.At(utc("2024-03-30T01:15:00Z")); got != two {
		t.Errorf("2024-03-30 02:15 CET: got %+v", got)
	}

	// Fall back, 2024-10-27: 03:00 CEST goes back to 02:00 CET; the
	// wall-clock minute 02:30 occurs twice and matches both times.
	for _, at := range []string{"2024-10-27T00:30:00Z", "2024-10-27T01:30:00Z"} {
		if got := half.At(utc(at)); got != two {
			t.Errorf("fall back %s (%s Berlin): got %+v, want %+v", at, utc(at).In(berlinLoc(t)), got, two)
		}
	}
	count := 0
	for m := utc("2024-10-26T22:00:00Z"); m.Before(utc("2024-10-27T04:00:00Z")); m = m.Add(time.Minute) {
		if s.At(m) == two {
			count++
		}
	}
	if count != 120 {
		t.Errorf("fall back: hour 2 active for %d minutes, want 120 (it happens twice)", count)
	}
}

func berlinLoc(t *testing.T) *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestCacheFollowsTime(t *testing.T) {
	p9 := Policy{IdleCount: 9}
	s := mustSchedule(t, base, Period{Periods: []string{"5 * * * *"}, Policy: p9})
	seq := []struct {
		at   string
		want Policy
	}{
		{"2024-05-01T10:04:59Z", base.Policy},
		{"2024-05-01T10:05:00Z", p9},
		{"2024-05-01T10:05:59.999Z", p9},
		{"2024-05-01T10:06:00Z", base.Policy},
		{"2024-05-01T10:05:30Z", p9}, // time going backwards is fine: At is pure
		{"1969-12-31T23:59:30Z", base.Policy},
		{"1969-12-31T23:05:30Z", p9}, // negative Unix times floor correctly
	}
	for _, tt := range seq {
		at, err := time.Parse(time.RFC3339Nano, tt.at)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.At(at); got != tt.want {
			t.Errorf("At(%s) = %+v, want %+v", tt.at, got, tt.want)
		}
	}
}

func TestConcurrentAt(t *testing.T) {
	p := Policy{IdleCount: 4}
	s := mustSchedule(t, base, Period{Periods: []string{"*/2 * * * *"}, Policy: p})
	start := utc("2024-05-01T00:00:00Z")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				m := start.Add(time.Duration(i%50) * time.Minute)
				want := base.Policy
				if m.Minute()%2 == 0 {
					want = p
				}
				if got := s.At(m); got != want {
					t.Errorf("At(%s) = %+v, want %+v", m, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestMatchesAgreesWithCron cross-checks the bit matching (which mirrors
// robfig/cron's unexported star bit) against cron's own Next, so a library
// upgrade that changes the representation fails here.
func TestMatchesAgreesWithCron(t *testing.T) {
	specs := []string{
		"* * * * *", "*/15 9-17 * * 1-5", "0 0 1 * mon", "0 0 * * mon", "0 0 1-7 * *",
		"30 2 ? * *", "5,10 */3 13 * 5", "0 12 * jan,jul *", "@daily", "@weekly", "@monthly",
		"0 0 29 2 *", "59 23 31 12 *", "* * 1/2 * *", "* * * * 0/2",
	}
	for _, spec := range specs {
		sched, err := ParseCron(spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		sched.Location = time.UTC
		// Walk a leap year in 7-minute steps, plus every minute of two days.
		check := func(m time.Time) {
			want := sched.Next(m.Add(-time.Second)).Equal(m)
			if got := specMatches(sched, m); got != want {
				t.Fatalf("%q at %s: specMatches=%v, cron.Next says %v", spec, m, got, want)
			}
		}
		for m := utc("2024-01-01T00:00:00Z"); m.Year() == 2024; m = m.Add(7 * time.Minute) {
			check(m)
		}
		for m := utc("2024-02-28T00:00:00Z"); m.Before(utc("2024-03-02T00:00:00Z")); m = m.Add(time.Minute) {
			check(m)
		}
	}
}

func TestNewScheduleErrors(t *testing.T) {
	tests := []struct {
		name   string
		period Period
		field  string
		want   string
	}{
		{"bad cron", Period{Periods: []string{"61 * * * *"}}, "periods", "invalid cron"},
		{"six fields", Period{Periods: []string{"0 * * * * *"}}, "periods", "invalid cron"},
		{"empty cron", Period{Periods: []string{" "}}, "periods", "empty"},
		{"no periods", Period{}, "periods", "no cron"},
		{"tz prefix", Period{Periods: []string{"TZ=UTC"}}, "periods", "timezone"},
		{"cron tz prefix", Period{Periods: []string{"CRON_TZ=Europe/Berlin * * * * *"}}, "periods", "timezone"},
		{"every", Period{Periods: []string{"@every 5m"}}, "periods", "interval"},
		{"unknown zone", Period{Periods: []string{"* * * * *"}, Timezone: "Mars/Olympus"}, "timezone", "unknown time zone"},
		{"negative idle", Period{Periods: []string{"* * * * *"}, Policy: Policy{IdleCount: -1}}, "idle_count", "0 or more"},
		{"negative idle time", Period{Periods: []string{"* * * * *"}, Policy: Policy{IdleTime: -time.Second}}, "idle_time", "negative"},
		{"negative factor", Period{Periods: []string{"* * * * *"}, Policy: Policy{ScaleFactor: -0.5}}, "scale_factor", "0 or more"},
		{"negative limit", Period{Periods: []string{"* * * * *"}, Policy: Policy{ScaleFactorLimit: -1}}, "scale_factor_limit", "0 or more"},
		{"negative suspended idle time", Period{Periods: []string{"* * * * *"}, Policy: Policy{SuspendedIdleTime: -time.Second}}, "suspended_idle_time", "negative"},
		{"negative suspended count", Period{Periods: []string{"* * * * *"}, Policy: Policy{SuspendedIdleCount: -1}}, "suspended_idle_count", "0 or more"},
		{"negative target wait", Period{Periods: []string{"* * * * *"}, Policy: Policy{TargetWait: -time.Second}}, "target_wait", "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSchedule([]Period{base, tt.period})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "period 1") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q should name period 1 and contain %q", err, tt.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("want *FieldError for %q, got %#v", tt.field, fe)
			}
		})
	}
	if _, err := NewSchedule(nil); err == nil {
		t.Error("NewSchedule(nil) should fail")
	}
}

func BenchmarkAt(b *testing.B) {
	s, err := NewSchedule([]Period{base,
		{Periods: []string{"* 8-17 * * mon-fri"}, Timezone: "Europe/Berlin", Policy: business},
		{Periods: []string{"* 0-5 * * *"}, Timezone: "America/New_York", Policy: Policy{}},
	})
	if err != nil {
		b.Fatal(err)
	}
	t0 := utc("2024-01-15T07:30:00Z")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Advance 1ms per call: a new minute every 60000 calls, like a busy scaler.
		s.At(t0.Add(time.Duration(i) * time.Millisecond))
	}
}

// The learned profile counts hours in the zone of the period that sets
// target_wait, else of the first period, else UTC; a bad zone is an error.
func TestProfileZone(t *testing.T) {
	cases := []struct {
		periods []Period
		want    string
	}{
		{nil, "UTC"},
		{[]Period{{Timezone: "Europe/Berlin"}, {Timezone: "America/New_York"}}, "Europe/Berlin"},
		{[]Period{{}, {Timezone: "America/New_York", Policy: Policy{TargetWait: 15 * time.Second}}}, "America/New_York"},
		{[]Period{{Timezone: "Europe/Berlin"}, {Policy: Policy{TargetWait: 15 * time.Second}}}, "UTC"},
	}
	for i, c := range cases {
		z, err := ProfileZone(c.periods)
		if err != nil || z.String() != c.want {
			t.Errorf("case %d: zone %v, %v; want %s", i, z, err, c.want)
		}
	}
	if _, err := ProfileZone([]Period{{Timezone: "Mars/Olympus"}}); err == nil {
		t.Error("an unknown zone gave no error")
	}
}
