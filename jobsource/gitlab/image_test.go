package gitlab

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/berth-ci/berth/jobsource"
)

// A payload as GitLab sends it for a job with image:, services: and the
// job's registry login.
const imagePayload = `{"id": 7, "token": "t",
 "image": {"name": "registry.example.com/team/app:1", "entrypoint": [""], "pull_policy": ["if-not-present"]},
 "services": [{"name": "postgres:16", "alias": "db", "command": ["postgres", "-F"]}, {"name": "redis:7"}],
 "credentials": [{"type": "registry", "url": "registry.example.com", "username": "gitlab-ci-token", "password": "job-token"}],
 "steps": [{"name": "script", "script": ["make"], "when": "on_success"}]}`

func TestPayloadImageAndServicesReachTheSpec(t *testing.T) {
	var p jobPayload
	if err := json.Unmarshal([]byte(imagePayload), &p); err != nil {
		t.Fatal(err)
	}
	spec := buildSpec(&p, newJobVars(p.Variables, runnerEnv{projectRel: "1/group/project", tmpName: "tmp"}), "", "1/group/project", "tmp")
	im := spec.Image
	if im == nil || im.Name != "registry.example.com/team/app:1" || len(im.Entrypoint) != 1 || im.Entrypoint[0] != "" {
		t.Fatalf("image = %+v", im)
	}
	if len(im.Credentials) != 1 || im.Credentials[0].Password != "job-token" || im.Credentials[0].Registry != "registry.example.com" {
		t.Fatalf("credentials = %+v", im.Credentials)
	}
	if len(spec.Services) != 2 || spec.Services[0].Alias != "db" || spec.Services[1].Name != "redis:7" {
		t.Fatalf("services = %+v", spec.Services)
	}
	if failureReason(jobsource.FailureImagePull) != "image_pull_failure" {
		t.Fatal("image pull failures are not reported as image_pull_failure")
	}
	if allowedReason("image_pull_failure", baseReasons) != "runner_system_failure" {
		t.Fatal("a GitLab without image_pull_failure does not get runner_system_failure")
	}
}

// services: variables reach the service over the job's public variables
// (GitLab Runner's order: the service's win), expanded against both; the
// job's secrets and file variables do not. docker: user reaches the job's
// image and each service.
func TestServiceOptionsFromThePayload(t *testing.T) {
	const payload = `{"id": 8, "token": "t",
 "variables": [{"key": "CI_JOB_ID", "value": "8", "public": true}, {"key": "DB", "value": "app", "public": true},
  {"key": "SHARED", "value": "job", "public": true}, {"key": "SECRET", "value": "s3cr3t", "public": false, "masked": true},
  {"key": "KUBECONFIG", "value": "cfg", "public": true, "file": true}],
 "image": {"name": "busybox", "executor_opts": {"docker": {"user": "builder"}}},
 "services": [{"name": "postgres:16", "alias": "db", "variables": [{"key": "POSTGRES_DB", "value": "$DB-$CI_JOB_ID"}, {"key": "SHARED", "value": "service"}],
   "executor_opts": {"docker": {"user": "999:999"}}}],
 "steps": [{"name": "script", "script": ["make"], "when": "on_success"}]}`
	var p jobPayload
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		t.Fatal(err)
	}
	spec := buildSpec(&p, newJobVars(p.Variables, runnerEnv{projectRel: "1/group/project", tmpName: "tmp"}), "", "1/group/project", "tmp")
	if spec.Image == nil || spec.Image.User != "builder" {
		t.Fatalf("image = %+v, want user builder", spec.Image)
	}
	if len(spec.Services) != 1 || spec.Services[0].User != "999:999" {
		t.Fatalf("services = %+v", spec.Services)
	}
	env := spec.Services[0].Variables
	for _, want := range []string{"CI_JOB_ID=8", "DB=app", "POSTGRES_DB=app-8"} {
		if !slices.Contains(env, want) {
			t.Errorf("service env %v lacks %s", env, want)
		}
	}
	if got := envLast(env, "SHARED"); got != "service" {
		t.Errorf("SHARED = %q in the service, want the service's own value over the job's", got)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "SECRET=") || strings.HasPrefix(kv, "KUBECONFIG=") {
			t.Errorf("service env holds %s: secrets and file variables stay with the job", kv)
		}
	}
	if err := platformErr(&p); err != nil {
		t.Fatalf("no platform: %v", err)
	}
}

func envLast(env []string, k string) string {
	v := ""
	for _, kv := range env {
		if key, val, _ := strings.Cut(kv, "="); key == k {
			v = val
		}
	}
	return v
}

// A docker: platform other than linux/amd64, on the image or a service,
// is refused with a message naming it; linux/amd64 is fine.
func TestPlatformOtherThanAmd64Refused(t *testing.T) {
	for _, tc := range []struct{ payload, says string }{
		{`{"image": {"name": "busybox", "executor_opts": {"docker": {"platform": "linux/arm64"}}}}`, `busybox asks for docker: platform "linux/arm64"`},
		{`{"image": {"name": "busybox"}, "services": [{"name": "redis", "executor_opts": {"docker": {"platform": "arm64"}}}]}`, `service redis asks for docker: platform "arm64"`},
		{`{"image": {"name": "busybox", "executor_opts": {"docker": {"platform": "linux/amd64"}}}}`, ""},
	} {
		var p jobPayload
		if err := json.Unmarshal([]byte(tc.payload), &p); err != nil {
			t.Fatal(err)
		}
		err := platformErr(&p)
		if tc.says == "" && err != nil || tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%s: err %v, want %q", tc.payload, err, tc.says)
		}
	}
}
