//go:build linux

package jobroot_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/jobroot"
)

func TestJobRunsInTheImageWithAFreshRoot(t *testing.T) {
	ref, host := push(t, "busybox:1", testImage(t, ""))
	build := t.TempDir()
	os.Chmod(build, 0o777)
	os.WriteFile(filepath.Join(build, "checkout.txt"), []byte("project files"), 0o644)
	hostOnly := filepath.Join(t.TempDir(), "host-only")
	os.WriteFile(hostOnly, nil, 0o644)
	spec := jobroot.Spec{
		Image: ref, Settings: settings(t, host),
		Binds: []jobroot.Bind{{Source: build, Target: "/builds/project"}},
		Env:   []string{"JOB_VAR=from-job"},
	}
	script := `set -e
cat /etc/os-release
echo "image=$IMAGE_VAR job=$JOB_VAR pwd=$(pwd) id=$(id -u) home=$HOME"
cat /builds/project/checkout.txt; echo
echo built > /builds/project/artifact
test ! -e ` + hostOnly + ` && echo "host file not seen"
test ! -e /usr/bin/go && echo "no host binaries"
grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status
if mount -t tmpfs none /mnt 2>/dev/null; then echo "MOUNT WORKED"; fi
echo leaked > /etc/leak; touch /bin/leak`
	code, out, err := runJob(t, spec, script)
	if err != nil || code != 0 {
		t.Fatalf("job: code %d, err %v, output:\n%s", code, err, out)
	}
	for _, want := range []string{"NAME=berth-test-image", "image=from-image job=from-job pwd=/srv/app id=0 home=/root",
		"project files", "host file not seen", "no host binaries", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "MOUNT WORKED") {
		t.Errorf("the job could mount: the seccomp filter is missing")
	}
	if b, _ := os.ReadFile(filepath.Join(build, "artifact")); string(b) != "built\n" {
		t.Errorf("the build dir did not get the job's artifact: %q", b)
	}

	code, out, err = runJob(t, spec, `test ! -e /etc/leak && test ! -e /bin/leak && echo fresh`)
	if err != nil || code != 0 || !strings.Contains(out, "fresh") {
		t.Fatalf("second job saw the first one's writes: code %d err %v\n%s", code, err, out)
	}
	if !strings.Contains(out, "Using cached image") {
		t.Errorf("the second job did not use the cache:\n%s", out)
	}
	jobs, _ := os.ReadDir(filepath.Join(spec.Settings.CacheDir, "jobs"))
	if len(jobs) != 0 {
		t.Errorf("job directories left behind: %v", jobs)
	}
}

func TestEntrypointOverrideAndExitCode(t *testing.T) {
	img := testImage(t, "")
	ref, host := push(t, "busybox:1", img)
	spec := jobroot.Spec{Image: ref, Settings: settings(t, host), Entrypoint: []string{"/bin/env"}}
	code, out, err := runJob(t, spec, "exit 3")
	// env runs `sh -c "exit 3"`: the entrypoint came first.
	if err != nil || code != 3 {
		t.Fatalf("code %d err %v\n%s", code, err, out)
	}
}

func TestBadImagesFailTheJobNamingTheImage(t *testing.T) {
	ref, host := push(t, "busybox:1", testImage(t, ""))
	for _, tc := range []struct {
		name, image, reason, says string
		mod                       func(*jobroot.Settings)
	}{
		{"missing", host + "/nope:1", "image_pull_failure", "not found", nil},
		{"disallowed", ref, "image_pull_failure", "allowed_images", func(s *jobroot.Settings) { s.Allowed = []string{"golang:*"} }},
		{"not cached under never", ref, "image_pull_failure", "pull_policy", func(s *jobroot.Settings) { s.PullPolicy = "never" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := settings(t, host)
			if tc.mod != nil {
				tc.mod(&s)
			}
			_, out, err := runJob(t, jobroot.Spec{Image: tc.image, Settings: s}, "true")
			var se *jobroot.SetupError
			if !errors.As(err, &se) || se.Reason != tc.reason || !strings.Contains(se.Message, tc.image) || !strings.Contains(se.Message, tc.says) {
				t.Fatalf("err = %v (%+v), want a %s naming %s and %q\n%s", err, se, tc.reason, tc.image, tc.says, out)
			}
		})
	}
}

func TestImageUser(t *testing.T) {
	ref, host := push(t, "busybox:user", testImage(t, "builder"))
	code, out, err := runJob(t, jobroot.Spec{Image: ref, Settings: settings(t, host)}, "id -u")
	if err != nil || code != 0 {
		t.Fatalf("code %d err %v\n%s", code, err, out)
	}
	// As root the job's namespace maps every ID and the image's user runs;
	// unprivileged only root is mapped and the runner says so.
	if !strings.Contains(out, "1000") && !strings.Contains(out, "not mapped") {
		t.Fatalf("job did not run as the image's user, nor said why:\n%s", out)
	}
}

// TestServiceReachedByAlias starts a web server from an image as a service
// and reaches it from the job by its alias; the service is gone after the
// job.
func TestServiceReachedByAlias(t *testing.T) {
	ref, host := push(t, "tools/web:1", testImage(t, ""))
	port := freePort(t)
	svc := jobroot.Service{Image: ref, Alias: "cache-svc", Entrypoint: []string{"sh", "-c"},
		Command: []string{"mkdir -p /www && echo pong > /www/index.html && exec httpd -f -p " + port + " -h /www"}}
	spec := jobroot.Spec{Image: ref, Settings: settings(t, host), Services: []jobroot.Service{svc}}
	script := `for i in $(seq 1 100); do wget -q -O- http://cache-svc:` + port + `/ 2>/dev/null && break; sleep 0.05; done
grep cache-svc /etc/hosts; wget -q -O- http://cache-svc:` + port + `/`
	code, out, err := runJob(t, spec, script)
	if err != nil || code != 0 || strings.Count(out, "pong") != 2 {
		t.Fatalf("code %d err %v, want pong twice:\n%s", code, err, out)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		t.Fatal("the service still listens after the job ended")
	}
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
