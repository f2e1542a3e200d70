package gitlab

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// TestMeasurePacing measures what one running job costs GitLab: PUT
// (keep-alive) and PATCH (log) calls per job-minute, for a quiet job and a
// chatty one (a line every 100 ms), under GitLab intervals of 3 s (a job
// whose log someone watches), 30 s and 60 s, with berth's default config;
// next to it, gitlab-runner's rule run on the same events in virtual time
// (gitlabRunnerRule). It takes BERTH_MEASURE_PACING minutes of wall time,
// so it runs only when that is set; docs/gitlab.md has its figures.
func TestMeasurePacing(t *testing.T) {
	minutes, _ := strconv.Atoi(os.Getenv("BERTH_MEASURE_PACING"))
	if minutes <= 0 {
		t.Skip("set BERTH_MEASURE_PACING=MINUTES to measure (docs/gitlab.md)")
	}
	d := time.Duration(minutes) * time.Minute
	type row struct {
		interval   int
		chatty     bool
		puts, pats int
	}
	var mu sync.Mutex
	var rows []row
	var wg sync.WaitGroup
	for _, interval := range []int{3, 30, 60} {
		for _, chatty := range []bool{false, true} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f := gitlabfake.New(gitlabfake.Options{TraceUpdateInterval: interval})
				defer f.Close()
				id := f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}, Variables: noGit})
				s, err := New(Config{URL: f.URL(), Token: f.Token(), Version: "test"}, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Error(err)
					return
				}
				j := takeJob(t, s)
				start := time.Now()
				for i := 0; time.Since(start) < d; i++ {
					if chatty {
						fmt.Fprintf(j.Log(), "line %d\n", i)
					}
					time.Sleep(100 * time.Millisecond)
				}
				r := row{interval: interval, chatty: chatty, puts: f.Job(id).KeepAlives(), pats: f.Count(gitlabfake.EndpointTrace, 0)}
				_ = j.Finish(testCtx(t), jobsource.Result{})
				mu.Lock()
				rows = append(rows, r)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, r := range rows {
		gp, gt := gitlabRunnerRule(time.Duration(r.interval)*time.Second, r.chatty, d)
		t.Logf("interval %2d s, chatty %-5v: berth %5.2f PUT + %5.2f PATCH per job-minute; gitlab-runner's rule %5.2f PUT + %5.2f PATCH",
			r.interval, r.chatty, float64(r.puts)/float64(minutes), float64(r.pats)/float64(minutes), gp/float64(minutes), gt/float64(minutes))
	}
}

// gitlabRunnerRule counts the calls gitlab-runner's job trace makes over d
// (network/trace.go, watch/incrementalUpdate/touchJob; common/consts.go):
// it wakes every update interval (3 s until GitLab's header, then the
// header's), PATCHes what is new, and PUTs when nothing went out for more
// than 30 s (MinTraceForceSendInterval; FF_USE_DYNAMIC_TRACE_FORCE_SEND_INTERVAL
// off, its default). A chatty job has output at every wake; the first
// line (the runner's banner) is there at the first wake either way.
func gitlabRunnerRule(interval time.Duration, chatty bool, d time.Duration) (puts, patches float64) {
	const forceSend = 30 * time.Second
	wait := 3 * time.Second
	var now, sent time.Duration
	first := true
	for now+wait <= d {
		now += wait
		if chatty || first {
			patches++
			sent, wait, first = now, interval, false
			continue
		}
		if now-sent >= forceSend { // the timer fires after the interval: more than 30 s have passed
			puts++
			sent, wait = now, interval
		}
	}
	return puts, patches
}
