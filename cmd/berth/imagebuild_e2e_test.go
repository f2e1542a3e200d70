package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/imagetest"
)

// buildScript builds a Containerfile with FROM base and a RUN step with
// buildah's chroot isolation, as docs/images.md's GitLab example does,
// and pushes the result to ref.
func buildScript(base, ref string) string {
	return `set -e
export TMPDIR=/tmp HOME=/tmp BUILDAH_ISOLATION=chroot
storage="--root /tmp/containers --runroot /tmp/containers-run --storage-driver vfs"
mkdir -p /tmp/ctx && cd /tmp/ctx
printf 'FROM ` + base + `\nRUN echo built-by-run > /from-run\n' > Containerfile
buildah $storage bud --tls-verify=false -t ` + ref + ` .
buildah $storage push --tls-verify=false ` + ref + `
echo BUILD-PUSHED`
}

// TestImageBuildsWithBuildah is issue 47's path on the real binary: with
// provider_config image_builds, a job builds a Containerfile with FROM (an
// image of the test registry) and RUN using `buildah bud --isolation
// chroot` and pushes it; the next job runs in the built image and sees the
// RUN's file; a tmpfs mount is still refused. Without image_builds the
// same build fails, and the job's log names the setting.
func TestImageBuildsWithBuildah(t *testing.T) {
	if _, err := exec.LookPath("buildah"); err != nil {
		t.Skip("buildah is not installed (Debian: apt-get install -y buildah); jobs run the host's buildah through host_paths")
	}
	host := imagetest.Registry(t)
	base := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	built := host + "/built:1"
	images := fmt.Sprintf("\n[images]\ninsecure_registries = [%q]\n", host)

	d := newDaemon(t, "[autoscaler.provider_config]\nnetwork = \"host\"\nimage_builds = true\n"+images)
	out, errOut, code := d.berth("submit", "--wait", "--", buildScript(base, built))
	if code != 0 || !strings.Contains(out, "BUILD-PUSHED") {
		t.Fatalf("with image_builds, buildah bud of FROM + RUN and push exited %d:\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = d.berth("submit", "--wait", "--image", built, "--", "cat /from-run")
	if code != 0 || !strings.Contains(out, "built-by-run") {
		t.Fatalf("a job in the built image does not see the RUN's file (exit %d):\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = d.berth("submit", "--wait", "--", "mkdir /tmp/t && mount -t tmpfs none /tmp/t")
	if code == 0 || !regexp.MustCompile(`(?i)not permitted|permission denied`).MatchString(out) {
		t.Fatalf("with image_builds a tmpfs mount is not refused (exit %d):\n%s\n%s", code, out, errOut)
	}

	off := newDaemon(t, "[autoscaler.provider_config]\nnetwork = \"host\"\n"+images)
	out, errOut, code = off.berth("submit", "--wait", "--", buildScript(base, host+"/refused:1"))
	if code == 0 || strings.Contains(out, "BUILD-PUSHED") {
		t.Fatalf("without image_builds the build worked (exit %d):\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "image_builds") {
		t.Errorf("without image_builds the failed build's log does not name the setting:\n%s\n%s", out, errOut)
	}
}
