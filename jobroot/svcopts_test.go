//go:build linux

package jobroot_test

import (
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/berth-ci/berth/jobroot"
)

// exposing is busybox with EXPOSE port/tcp, as a service image has.
func exposing(t *testing.T, port string) v1.Image {
	img := testImage(t, "")
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.ExposedPorts = map[string]struct{}{port + "/tcp": {}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// A service gets its own variables over its image's, and the job starts
// only once the port its image exposes answers: the script asks the
// service at once, with no retry loop, though the service takes its time
// to listen.
func TestServiceVariablesAndPortWaitedFor(t *testing.T) {
	port := freePort(t)
	ref, host := push(t, "tools/web:ports", exposing(t, port))
	svc := jobroot.Service{Image: ref, Alias: "web", Entrypoint: []string{"sh", "-c"},
		Env:     []string{"SVC_VAR=from-service", "IMAGE_VAR=overridden"},
		Command: []string{`sleep 1; mkdir -p /www && echo "$SVC_VAR $IMAGE_VAR" > /www/index.html && exec httpd -f -p ` + port + ` -h /www`}}
	spec := jobroot.Spec{Image: ref, Settings: settings(t, host), Services: []jobroot.Service{svc}}
	code, out, err := runJob(t, spec, `wget -q -O- http://web:`+port+`/; echo "job sees SVC_VAR=[${SVC_VAR:-}]"`)
	if err != nil || code != 0 {
		t.Fatalf("code %d err %v\n%s", code, err, out)
	}
	if !strings.Contains(out, "from-service overridden") {
		t.Fatalf("the service did not get its variables over the image's, or was not waited for:\n%s", out)
	}
	if !strings.Contains(out, "Waiting for services") || strings.Contains(out, "WARNING") {
		t.Fatalf("want a wait and no warning:\n%s", out)
	}
	if !strings.Contains(out, "job sees SVC_VAR=[]") {
		t.Fatalf("a service's variables leaked into the job:\n%s", out)
	}
}

// A service that never listens on its exposed port gets GitLab Runner's
// warning, with what it printed, once the timeout passes; the job runs.
func TestServicePortNeverOpenWarnsAndJobGoesOn(t *testing.T) {
	port := freePort(t)
	ref, host := push(t, "tools/mute:1", exposing(t, port))
	svc := jobroot.Service{Image: ref, Entrypoint: []string{"sh", "-c"},
		Command: []string{"echo database-starting-but-stuck; exec sleep 600"}}
	s := settings(t, host)
	s.ServicesTimeout = 1
	code, out, err := runJob(t, jobroot.Spec{Image: ref, Settings: s, Services: []jobroot.Service{svc}}, "echo script-ran")
	if err != nil || code != 0 || !strings.Contains(out, "script-ran") {
		t.Fatalf("the job did not go on: code %d err %v\n%s", code, err, out)
	}
	for _, want := range []string{"*** WARNING: Service " + ref + " probably didn't start properly", "port " + port, "database-starting-but-stuck"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the warning lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "[service:") {
		t.Fatalf("the service's output reached the log without CI_DEBUG_SERVICES:\n%s", out)
	}
}

// A service that exits before it listens is reported at once, not after
// the timeout: the warning says it exited.
func TestServiceExitedBeforeItsPortWarns(t *testing.T) {
	port := freePort(t)
	ref, host := push(t, "tools/crash:1", exposing(t, port))
	svc := jobroot.Service{Image: ref, Entrypoint: []string{"sh", "-c"}, Command: []string{"echo cannot-open-data-dir; exit 3"}}
	code, out, err := runJob(t, jobroot.Spec{Image: ref, Settings: settings(t, host), Services: []jobroot.Service{svc}}, "echo script-ran")
	if err != nil || code != 0 || !strings.Contains(out, "script-ran") {
		t.Fatalf("the job did not go on: code %d err %v\n%s", code, err, out)
	}
	for _, want := range []string{"service exited before it answered on port " + port, "cannot-open-data-dir"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the warning lacks %q:\n%s", want, out)
		}
	}
}

// CI_DEBUG_SERVICES=true in a service's variables copies its output into
// the job's log, each line named by the service.
func TestDebugServicesShowsTheServiceLog(t *testing.T) {
	ref, host := push(t, "tools/chatty:1", testImage(t, ""))
	svc := jobroot.Service{Image: ref, Alias: "chatty", Entrypoint: []string{"sh", "-c"},
		Env:     []string{"CI_DEBUG_SERVICES=true"},
		Command: []string{"echo service-line-one; echo service-line-two >&2; exec sleep 600"}}
	code, out, err := runJob(t, jobroot.Spec{Image: ref, Settings: settings(t, host), Services: []jobroot.Service{svc}}, "sleep 0.5; echo script-ran")
	if err != nil || code != 0 {
		t.Fatalf("code %d err %v\n%s", code, err, out)
	}
	for _, want := range []string{"[service:chatty] service-line-one", "[service:chatty] service-line-two", "script-ran"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the log lacks %q:\n%s", want, out)
		}
	}
}

// image: docker: user runs the job as that user of its image, though the
// image names none.
func TestJobUserFromTheJob(t *testing.T) {
	ref, host := push(t, "busybox:nouser", testImage(t, ""))
	code, out, err := runJob(t, jobroot.Spec{Image: ref, Settings: settings(t, host), User: "builder"}, "id -u")
	if err != nil || code != 0 {
		t.Fatalf("code %d err %v\n%s", code, err, out)
	}
	// As root every ID is mapped; unprivileged only root is, and the runner
	// says so.
	if !strings.Contains(out, "1000") && !strings.Contains(out, `user "builder" is not mapped`) {
		t.Fatalf("the job did not run as builder, nor said why:\n%s", out)
	}
	_, out, err = runJob(t, jobroot.Spec{Image: ref, Settings: settings(t, host), User: "nobody-here"}, "id -u")
	if err == nil || !strings.Contains(err.Error(), `"nobody-here" is not in the image's /etc/passwd`) {
		t.Fatalf("an unknown user: err %v, want one naming it\n%s", err, out)
	}
}
