package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// The HA soak: BERTH_HA_SOAK=N runs N fault cycles against two real
// `berth run` managers sharing one etcd (embedded, one member) and real
// sandboxes, while a submitter sends a job every ~300 ms through either
// manager (api.Client: retries 503, an idempotency key per submit). Each
// cycle picks one fault at random: kill -9 of the leader (restarted as a
// standby), SIGSTOP of the leader for 3-8 s, or etcd stopped for 3-6 s.
// At the end it counts the jobs accepted (a submit answered with an ID),
// ended, lost (accepted but unknown, or not ended 3 minutes after the
// last fault), run twice (one submit that made two jobs, or one job whose
// script ran twice) and the most instances seen at once, and fails on a
// lost job, a job run twice or more instances than max_instances.
// BERTH_SOAK_SEED fixes the random choices.
var ranToken = regexp.MustCompile(`ran-soaktok-[0-9]+`)

func TestHASoak(t *testing.T) {
	cycles, _ := strconv.Atoi(os.Getenv("BERTH_HA_SOAK"))
	if cycles <= 0 {
		t.Skip("set BERTH_HA_SOAK=N to run N kill -9 / SIGSTOP / etcd-outage cycles on two managers (minutes)")
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("BERTH_SOAK_SEED"), 10, 64); err == nil {
		seed = s
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	t.Logf("HA soak: %d cycles, BERTH_SOAK_SEED=%d", cycles, seed)
	f := newHAFleet(t, 1, haAutoscaler)
	peak, _ := f.watchInstances()
	ms := []*daemon{f.manager(), f.manager()}
	ms[0].waitRole(30*time.Second, "leader")

	var mu sync.Mutex
	accepted := map[string]string{} // job ID → token of its submit
	tokens := map[string]int{}      // token → jobs seen with it
	refused, whyRefused := 0, map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			tok := fmt.Sprintf("soaktok-%d", i)
			c := ms[i%2].client()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			// The output names the token; the script text does not.
			j, err := c.Submit(ctx, api.JobRequest{Script: "t=" + tok + "; echo \"ran-$t\"; sleep 1"})
			cancel()
			mu.Lock()
			if err != nil {
				refused++
				whyRefused[shortReason(err.Error())]++
			} else {
				accepted[j.ID] = tok
			}
			mu.Unlock()
		}
	})

	faults := map[string]int{}
	for c := range cycles {
		time.Sleep(time.Duration(2000+rng.IntN(3000)) * time.Millisecond)
		leader := -1
		for i, d := range ms {
			if d.haHealth().Role == "leader" {
				leader = i
			}
		}
		kind := []string{"kill9", "sigstop", "etcd"}[rng.IntN(3)]
		if leader < 0 && kind != "etcd" {
			kind = "wait"
		}
		faults[kind]++
		t.Logf("cycle %d: %s (leader %d)", c, kind, leader)
		switch kind {
		case "kill9":
			ms[leader].kill9()
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
			ms[leader].start()
		case "sigstop":
			ms[leader].cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(time.Duration(3000+rng.IntN(5000)) * time.Millisecond)
			ms[leader].cmd.Process.Signal(syscall.SIGCONT)
		case "etcd":
			f.etcd.StopMember(0)
			time.Sleep(time.Duration(3000+rng.IntN(3000)) * time.Millisecond)
			if err := f.etcd.RestartMember(0); err != nil {
				t.Fatal(err)
			}
		case "wait":
			time.Sleep(3 * time.Second)
		}
	}
	close(stop)
	wg.Wait()

	// Settle: a leader, then every accepted job ended.
	waitFor(t, time.Minute, "a manager to lead after the last fault", func() bool {
		return ms[0].haHealth().Role == "leader" || ms[1].haHealth().Role == "leader"
	})
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	ended, lost := 0, 0
	deadline := time.Now().Add(3 * time.Minute)
	final := map[string]api.Job{}
	for _, id := range ids {
		for {
			j, err := ms[0].client().Job(context.Background(), id)
			if err == nil && j.State.Done() {
				final[id] = j
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	all, err := ms[0].client().Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ranTwice := 0
	for _, j := range all {
		out, _, _ := ms[0].berth("logs", j.ID)
		runs := ranToken.FindAllString(out, -1)
		for _, tok := range runs {
			tokens[tok]++
		}
		if len(runs) > 1 {
			ranTwice++
		}
	}
	for _, n := range tokens {
		if n > 1 {
			ranTwice++
		}
	}
	failedReasons := map[string]int{}
	for _, id := range ids {
		j, ok := final[id]
		if !ok {
			lost++
			continue
		}
		ended++
		if j.State != api.JobSuccess {
			failedReasons[shortReason(j.Reason)]++
		}
	}
	t.Logf("HA soak report: faults %v; jobs accepted %d, refused %d %v, ended %d (failed by reason %v), lost %d, run twice %d; most instances seen %d (max_instances 3)",
		faults, len(accepted), refused, whyRefused, ended, failedReasons, lost, ranTwice, peak.Load())
	if lost > 0 || ranTwice > 0 || peak.Load() > 3 {
		t.Errorf("HA soak failed: lost %d, run twice %d, most instances %d", lost, ranTwice, peak.Load())
	}
}
