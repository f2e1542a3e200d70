package gitlab

import (
	"encoding/json"
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
	spec := buildSpec(&p, "", "1/group/project", "tmp")
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
