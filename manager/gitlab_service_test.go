package manager

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/internal/imagetest"
)

// A GitLab job's service options end to end (issue 30 point 5): the
// service gets its services: variables over the job's public ones, its
// exposed port is waited for before the script (which asks it at once),
// CI_DEBUG_SERVICES copies its output into the job's log, and image:
// docker: user runs the script as that user, who may write in the
// project dir (opened to it as GitLab Runner does, umask 0000).
func TestGitLabServiceOptions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	host := imagetest.Registry(t)
	img := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	cf, _ := imagetest.Busybox(t, "").ConfigFile()
	cf = cf.DeepCopy()
	cf.Config.ExposedPorts = map[string]struct{}{port + "/tcp": {}}
	svcImg, err := mutate.ConfigFile(imagetest.Busybox(t, ""), cf)
	if err != nil {
		t.Fatal(err)
	}
	svc := imagetest.Push(t, host, "tools/web:1", svcImg)
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	id := fake.AddJob(gitlabfake.JobSpec{Image: img, ImageUser: "builder",
		Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}, {Key: "DB", Value: "app", Public: true},
			{Key: "CI_DEBUG_SERVICES", Value: "true", Public: true}},
		Services: []gitlabfake.Service{{Name: svc, Alias: "web", Entrypoint: []string{"sh", "-c"},
			Command:   []string{`echo service-says-hello; sleep 1; mkdir -p /www && echo "db=$POSTGRES_DB" > /www/index.html && exec httpd -f -p ` + port + ` -h /www`},
			Variables: []gitlabfake.Variable{{Key: "POSTGRES_DB", Value: "$DB-svc"}}}},
		Script: []string{"wget -q -O- http://web:" + port + "/", "echo uid=$(id -u)", "touch made-by-the-job"}})
	startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
[autoscaler]
max_instances = 1
[autoscaler.provider_config]
network = "host"
[images]
insecure_registries = [%q]
`, fake.URL(), host))
	waitJob(t, fake, id)
	tr := fake.Job(id).Trace()
	for _, want := range []string{"Waiting for services", "db=app-svc", "[service:web] service-says-hello"} {
		if !strings.Contains(tr, want) {
			t.Errorf("trace lacks %q:\n%s", want, tr)
		}
	}
	if !strings.Contains(tr, "uid=1000") && !strings.Contains(tr, `user "builder" is not mapped`) {
		t.Errorf("the script did not run as builder, nor said why:\n%s", tr)
	}
	if fake.Job(id).FailureReason() != "" {
		t.Errorf("job failed: %s\n%s", fake.Job(id).FailureReason(), tr)
	}
}
