package manager

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// TestNextJobSeesNothingOfTheLast runs two GitLab jobs one after the other
// on the one instance of the fleet: the first leaves a background process
// and files behind, the second must find none of them, because the manager
// has the provider reset the instance between jobs.
func TestNextJobSeesNothingOfTheLast(t *testing.T) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	none := []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}
	first := fake.AddJob(gitlabfake.JobSpec{Variables: none, Script: []string{
		"setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &",
		"echo left > /tmp/left; echo left > /dev/shm/left; echo left > $HOME/left",
	}})
	second := fake.AddJob(gitlabfake.JobSpec{Variables: none, Script: []string{
		"echo procs=$(for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '[s]leep 1')",
		"echo files=$(ls /tmp/left /dev/shm/left $HOME/left 2>/dev/null | wc -l)",
	}})
	startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
[autoscaler]
max_instances = 1
`, fake.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatal(err)
	}
	instance := regexp.MustCompile(`Running on instance (\S+)`)
	a, b := instance.FindStringSubmatch(fake.Job(first).Trace()), instance.FindStringSubmatch(fake.Job(second).Trace())
	if a == nil || b == nil || a[1] != b[1] {
		t.Fatalf("the jobs did not run on one instance:\n%s\n%s", fake.Job(first).Trace(), fake.Job(second).Trace())
	}
	trace := fake.Job(second).Trace()
	if !strings.Contains(trace, "procs=0") || !strings.Contains(trace, "files=0") {
		t.Errorf("the second job on %s saw the first one's leftovers:\n%s", a[1], trace)
	}
}
