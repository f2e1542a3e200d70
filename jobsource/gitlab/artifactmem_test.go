package gitlab

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// The memory test runs berth's side of a job in a child process (this test
// binary again), so that its peak RSS is berth's alone: the fake GitLab
// stays in the parent and keeps only a digest of what it receives.
const (
	memChildEnv = "BERTH_TEST_ARTIFACT_MEM_CHILD"
	memGiB      = 1 << 30
)

// TestArtifactOfOneGiBInBoundedMemory uploads a 1 GiB file twice, as a
// raw report (the bytes as they are) and zipped in the archive, then a
// second job downloads that archive and extracts the 1 GiB file; berth's
// peak RSS above its idle RSS stays under 100 MB. Before the archive went
// through a temp file it sat whole in memory, twice, and a download was
// converted whole in memory before it was extracted (issue 42).
func TestArtifactOfOneGiBInBoundedMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("moves 2 GiB through a child process; the race detector's memory makes the bound meaningless")
	}
	f := newFake(t, gitlabfake.Options{MaxArtifactSize: 2 * memGiB, DigestArtifacts: true, TraceUpdateInterval: -1})
	id := f.AddJob(gitlabfake.JobSpec{Variables: noGit,
		Script: []string{"mkdir -p out rep", "truncate -s 1G out/big rep/big.json"},
		Artifacts: []gitlabfake.Artifact{
			{Paths: []string{"out/"}},
			{Type: "dotenv", Format: "raw", Paths: []string{"rep/big.json"}},
		}})
	dep := f.AddJob(gitlabfake.JobSpec{Variables: noGit, Dependencies: []int64{id}, Script: []string{"stat -c 'size %s' out/big"}})
	cmd := exec.Command(os.Args[0], "-test.run=^TestArtifactMemoryChild$", "-test.v")
	cmd.Env = append(os.Environ(), memChildEnv+"="+f.URL()+" "+f.Token(), "GOMAXPROCS=2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	idle, peak := childFigure(t, out, "idle_rss_kb"), childFigure(t, out, "peak_rss_kb")
	t.Logf("berth RSS: idle %d MB, peak %d MB, peak above idle %d MB", idle/1024, peak/1024, (peak-idle)/1024)
	if above := (peak - idle) / 1024; above >= 100 {
		t.Errorf("peak RSS %d MB above idle, want under 100 MB", above)
	}
	ups := f.Job(id).Artifacts()
	if len(ups) != 2 || f.Job(id).ReportedState() != "success" {
		t.Fatalf("job %s, uploads %+v:\n%s", f.Job(id).ReportedState(), ups, f.Job(id).Trace())
	}
	if ups[1].Size != memGiB {
		t.Errorf("raw report of %d bytes uploaded, want %d", ups[1].Size, memGiB)
	}
	if ups[0].Size <= 0 || ups[0].Format != "zip" {
		t.Errorf("archive %+v", ups[0])
	}
	if tr := f.Job(dep).Trace(); f.Job(dep).ReportedState() != "success" || !strings.Contains(tr, fmt.Sprintf("size %d", memGiB)) {
		t.Errorf("the dependent job %s:\n%s", f.Job(dep).ReportedState(), tr)
	}
}

// TestArtifactMemoryChild is berth's side of the test above; it does
// nothing unless that test started it.
func TestArtifactMemoryChild(t *testing.T) {
	env := os.Getenv(memChildEnv)
	if env == "" {
		t.Skip("run by TestArtifactOfOneGiBInBoundedMemory")
	}
	url, token, _ := strings.Cut(env, " ")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := New(Config{URL: url, Token: token, BuildsDir: filepath.Join(t.TempDir(), "builds"), TempDir: t.TempDir(),
		MaxArtifactSize: 2 * memGiB, Version: "test"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("idle_rss_kb %d\n", procStatus(t, "VmRSS"))
	for range 2 { // the upload, then the download
		var j jobsource.Job
		for j == nil {
			if j, err = s.Request(ctx); err != nil {
				t.Fatal(err)
			}
		}
		job := j.(*Job)
		job.Started("test-instance")
		if err := job.Prepare(ctx, localFiles{}); err != nil {
			t.Fatal(err)
		}
		if code, _ := (driver{t: t}).sh(job.Spec().Script, t.TempDir(), writerFunc(job.Log().Write), nil, nil); code != 0 {
			t.Fatalf("script exited %d", code)
		}
		if err := job.Finish(ctx, job.Collect(ctx, localFiles{}, jobsource.Result{})); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("peak_rss_kb %d\n", procStatus(t, "VmHWM"))
}

// procStatus reads a kB figure of /proc/self/status.
func procStatus(t *testing.T, key string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

func childFigure(t *testing.T, out []byte, key string) int64 {
	t.Helper()
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, key+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("child printed no %s:\n%s", key, out)
	return 0
}
