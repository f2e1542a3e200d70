package manager

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// A two-stage pipeline (issue 17): stage 1 builds a file it keeps as an
// artifact, fills the cache and writes a junit report; stage 2 runs on a
// fresh instance (max_use_count = 1) and reads stage 1's artifacts and the
// cache. The junit report reaches GitLab with its type and format.
func TestGitLabPipelineArtifactsAndCache(t *testing.T) { pipeline(t, "") }

// The same pipeline with the cache in an S3 bucket: a real S3 server
// (gofakes3) in-process, reached with minio-go.
func TestGitLabPipelineCacheInS3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("ci-cache"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	pipeline(t, fmt.Sprintf("[cache]\ns3_endpoint = %q\nbucket = \"ci-cache\"\nprefix = \"berth\"\naccess_key = \"k\"\nsecret_key = \"s\"\nregion = \"us-east-1\"\ninsecure = true\n",
		strings.TrimPrefix(srv.URL, "http://")))
	objs, err := backend.ListBucket("ci-cache", nil, gofakes3.ListBucketPage{})
	// The key names the GitLab server (gitlab/<host:port>/project/7/...),
	// sanitised into the object's readable prefix.
	if err != nil || len(objs.Contents) != 1 || !strings.HasPrefix(objs.Contents[0].Key, "berth/gitlab_127.0.0.1_") ||
		!strings.Contains(objs.Contents[0].Key, "_project_7_deps-build-") {
		t.Errorf("bucket holds %+v (%v), want the one cache stage 1 saved", objs, err)
	}
}

func pipeline(t *testing.T, extraConfig string) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	noGit := []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}
	build := fake.AddJob(gitlabfake.JobSpec{
		Name: "build", Stage: "build", ProjectID: 7, Variables: noGit,
		Script: []string{
			"mkdir -p out/sub .cache tmp",
			"echo built-by-stage-1 > out/sub/result.txt",
			"echo scratch > tmp/scratch.txt",
			"echo cached-data > .cache/data.txt",
			`echo '<testsuite name="unit" tests="1"><testcase name="ok"/></testsuite>' > report.xml`,
		},
		Artifacts: []gitlabfake.Artifact{
			{Name: "build-output", Paths: []string{"out/", "tmp/"}, Exclude: []string{"tmp/**"}, ExpireIn: "1 week"},
			{Type: "junit", Format: "gzip", Paths: []string{"report.xml"}, When: "always"},
		},
		Cache: []gitlabfake.Cache{{Key: "deps-$CI_JOB_STAGE", Paths: []string{".cache/"}}},
	})
	m := startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
request_concurrency = 2
check_interval = "100ms"
[autoscaler]
max_instances = 2
max_use_count = 1
[[autoscaler.policy]]
idle_count = 0
preemptive_mode = false
%s`, fake.URL(), extraConfig))
	waitJob(t, fake, build)
	ups := fake.Job(build).Artifacts()
	if len(ups) != 2 {
		t.Fatalf("%d artifacts uploaded, want the archive and the junit report:\n%s", len(ups), fake.Job(build).Trace())
	}
	archive, junit := ups[0], ups[1]
	if archive.Type != "archive" || archive.Format != "zip" || archive.Filename != "build-output.zip" || archive.ExpireIn != "1 week" {
		t.Errorf("archive uploaded as %+v", archive)
	}
	if junit.Type != "junit" || junit.Format != "gzip" {
		t.Errorf("junit report uploaded as type %q format %q", junit.Type, junit.Format)
	}
	zr, err := gzip.NewReader(bytes.NewReader(junit.Data))
	if err != nil {
		t.Fatal(err)
	}
	xml, _ := io.ReadAll(zr)
	if !strings.Contains(string(xml), `<testsuite name="unit"`) || zr.Name != "report.xml" {
		t.Errorf("junit report %q holds %q", zr.Name, xml)
	}

	// Stage 2: the cache is asked for by its stage-1 key through a fallback.
	test := fake.AddJob(gitlabfake.JobSpec{
		Name: "test", Stage: "test", ProjectID: 7, Variables: noGit, Dependencies: []int64{build},
		Script: []string{
			"cat out/sub/result.txt",
			"cat .cache/data.txt",
			"test ! -e tmp/scratch.txt",
			"echo instance $(hostname)",
		},
		Cache: []gitlabfake.Cache{{Key: "deps-$CI_JOB_STAGE", FallbackKeys: []string{"deps-build"}, Paths: []string{".cache/"}, Policy: "pull"}},
	})
	waitJob(t, fake, test)
	tr := fake.Job(test).Trace()
	for _, want := range []string{"built-by-stage-1", "cached-data", "Downloading artifacts for build", "Successfully extracted cache"} {
		if !strings.Contains(tr, want) {
			t.Errorf("stage 2 trace lacks %q:\n%s", want, tr)
		}
	}
	t.Logf("stage 2 trace:\n%s", tr)
	if a, b := gitlabfake.InstanceOf(fake.Job(build).Trace()), gitlabfake.InstanceOf(tr); a == "" || a == b {
		t.Errorf("stage 1 ran on %q and stage 2 on %q: want two instances (max_use_count = 1)", a, b)
	}
	if c := m.fleet.Counts(); c.Granted < 2 {
		t.Errorf("%d bookings for two jobs", c.Granted)
	}
}

// waitJob waits for the fake job id to succeed.
func waitJob(t *testing.T, fake *gitlabfake.Fake, id int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatalf("job %d did not finish: %v", id, err)
	}
	if j := fake.Job(id); j.ReportedState() != "success" {
		t.Fatalf("job %d: %s (%s)\n%s", id, j.ReportedState(), j.FailureReason(), j.Trace())
	}
}
