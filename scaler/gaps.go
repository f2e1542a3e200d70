package scaler

import "time"

// Fewer boots where traffic repeats: ski rental on the learned gaps between
// builds.
//
// A surplus instance of the suspended tier (one beyond its target, back
// from a job) is deleted once kept the break-even time, boot /
// suspended_cost: keeping it longer costs more than booting it again, if
// nothing is known about when it is used next. Where builds repeat every
// few minutes that is known: the next build draws the pool down and takes
// the surplus, and deleting it only means that the refill boots it again
// right after that build. So the core learns the gaps between the starts of
// builds (a build: arrivals with no quiet of buildQuiet between them) and
// keeps a surplus instance past the break-even time while the next build is
// expected within a break-even time from now (ski rental with a known
// distribution: keep while the idle cost until the next use, suspended_cost
// × the expected wait, is below the boot it saves).
//
// The expected wait for the next build, given that elapsed time passed
// since the last one began, is the mean of (gap − elapsed) over the learned
// gaps longer than elapsed: the residual of the distribution seen, not a
// guess of its shape. Office's builds come at exponential gaps of ~15
// minutes, so the residual stays ~15 minutes whatever the elapsed time.
//
// How the rule was chosen (office seeds 1–3, one day learned, boot 60 s,
// resume 10 s, suspended cost 0.1, target 15 s; boots and utilization):
// keepGapFactor compares the expected wait with keepGapFactor break-even
// times. At 1, plain ski rental (keep only while the idle cost until the next
// build is below a boot), office boots 2025 / 2043 / 2032 instead of 2039 /
// 2055 / 2071 at the same p95, but utilization 0.5822 / 0.5506 / 0.5583
// instead of 0.5829 / 0.5509 / 0.5619; on the whole table (bench/table.sh,
// 66 runs) 32 runs lose more than 0.0005 (monorepo −0.005 to −0.009, dst
// −0.002 to −0.003, office seed 3 −0.004) and no p95 rises (dst seed 3 from empty
// 21 → 14 s). At 0.5 office seed 3 still loses (0.5611). The surplus kept
// is not all taken by the next build, and what is taken was paid for by
// the suspended time before it. Keeping longer does save boots, but on gaps that
// are exponential (office's: mean 15 minutes, half of them under 10) the
// expected wait never falls below the break-even time, so every boot saved
// is paid with more suspended time than the boot costs (seeds 1 / 3): at
// 1.6, 1522 / 1532 boots at utilization 0.565 / 0.534 (−0.017 / −0.023); at 3, 1102 / 1164 at
// 0.557 / 0.534; at 1.6 keeping up to the largest build learned instead of
// the mean, 1459 / 1455 at 0.549 / 0.525. None of these holds the table's
// utilization, so the rule is off (keepGapFactor 0) and the code stays for
// a cost model where it pays (a suspended instance much cheaper than 0.1
// of a running one, or builds that repeat more regularly than at random).
//
// Only gaps within busy hours count (at most maxBuildGap: a night or a
// lunch break is a lull, not a repeat), and past the longest gap learned
// the next build is not expected at all: the surplus goes as before. The
// surplus kept is at most the mean build learned: the next build takes about
// that many from the pool, which the refill would otherwise boot again.

// buildQuiet is the quiet after an arrival that ends a build: office's
// builds arrive within 30 s and monorepo's pipelines within 60 s.
const buildQuiet = 2 * time.Minute

// maxBuildGap is the longest gap between builds that counts as a repeat.
const maxBuildGap = time.Hour

// gapMemory is how many gaps the model remembers (a day of office builds).
const gapMemory = 64

// minGaps is how many gaps the model needs before it expects anything.
const minGaps = 8

// keepGapFactor: a surplus instance is kept while the expected wait for the
// next build is below keepGapFactor break-even times (see above): 1 is ski
// rental's break-even. 0 turns the rule off, as it is: no factor measured
// kept the table's utilization.
const keepGapFactor = 0.0

// buildGaps learns the gaps between the starts of builds and their sizes.
type buildGaps struct {
	last  time.Time // the last arrival
	start time.Time // the start of the current build
	size  int       // jobs of the current build
	gaps  [gapMemory]time.Duration
	sizes [gapMemory]int
	n     int // gaps learned so far (the ring holds min(n, gapMemory))
}

// add counts n arrivals at now.
func (g *buildGaps) add(now time.Time, n int) {
	if g.last.IsZero() || now.Sub(g.last) > buildQuiet {
		if !g.start.IsZero() {
			if gap := now.Sub(g.start); gap <= maxBuildGap {
				i := g.n % gapMemory
				g.gaps[i], g.sizes[i] = gap, g.size
				g.n++
			}
		}
		g.start, g.size = now, 0
	}
	g.size += n
	if now.After(g.last) {
		g.last = now
	}
}

// nextBuild is the expected time from now until the next build starts, and
// the mean build learned; ok is false when the gaps say nothing: too
// few learned, or now is past every gap seen (a lull).
func (g *buildGaps) nextBuild(now time.Time) (wait time.Duration, size int, ok bool) {
	k := min(g.n, gapMemory)
	if k < minGaps || g.start.IsZero() {
		return 0, 0, false
	}
	elapsed := now.Sub(g.start)
	var sum time.Duration
	m := 0
	for i := range k {
		if g.gaps[i] > elapsed {
			sum += g.gaps[i] - elapsed
			m++
		}
	}
	if m == 0 {
		return 0, 0, false
	}
	t := 0
	for i := range k {
		t += g.sizes[i]
	}
	return sum / time.Duration(m), t / k, true
}

// gapKeep is how many pooled instances the learned gaps keep past the
// break-even time: up to the mean build learned beyond the tier's
// target t, while the next build is expected within factor break-even
// times (keep); 0 when the gaps say nothing.
func (a *arrivals) gapKeep(now time.Time, keep time.Duration, t int, factor float64) int {
	wait, size, ok := a.gaps.nextBuild(now)
	if !ok || float64(wait) >= factor*float64(keep) {
		return 0
	}
	return t + size
}
