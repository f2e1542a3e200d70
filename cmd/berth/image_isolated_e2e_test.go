package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/imagetest"
)

// TestSubmitWithImageOnIsolatedNetwork is `berth submit --image` with the
// local provider's default network = "isolated": the sandbox has no route
// to the registry, so berth pulls the image on the host into the
// instance's cache and the job runs in it, still without network. A
// missing image still fails with image_pull_failure. As root (sandbox IDs
// mapped to a subordinate range) and as nobody.
func TestSubmitWithImageOnIsolatedNetwork(t *testing.T) {
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, "builder"))
	users := map[string][]string{"as is": nil}
	if setpriv, err := exec.LookPath("setpriv"); err == nil && os.Getuid() == 0 {
		users["unprivileged"] = []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}
	} else if os.Getuid() == 0 {
		t.Fatal("setpriv (util-linux) is needed to run berth unprivileged; .ci/run installs it")
	}
	for who, prefix := range users {
		t.Run(who, func(t *testing.T) {
			d := newDaemon(t, fmt.Sprintf("[images]\ninsecure_registries = [%q]\nallowed_images = [\"%s/busybox:*\", \"%s/nothing:*\"]\n", host, host, host), prefix...)
			script := "cat /etc/os-release; echo var=$IMAGE_VAR; echo uid=$(id -u); " +
				"if wget -q -T 3 -O /dev/null http://" + host + "/v2/; then echo net=reached; else echo net=none; fi"
			out, errOut, code := d.berth("submit", "--wait", "--image", ref, "--", script)
			if code != 0 || !strings.Contains(out, "NAME=berth-test-image") || !strings.Contains(out, "var=from-image") {
				t.Fatalf("submit --image on an isolated instance exited %d:\n%s\n%s", code, out, errOut)
			}
			if !strings.Contains(out, "Pulling image "+ref+" on the host\n") || !strings.Contains(out, "Pulled image "+ref) || !strings.Contains(out, "on the host") {
				t.Errorf("the job log does not say berth pulled the image on the host:\n%s", out)
			}
			if !strings.Contains(out, "net=none") {
				t.Errorf("the job reached the registry from an isolated instance:\n%s", out)
			}
			if who == "as is" && os.Getuid() == 0 && !strings.Contains(out, "uid=1000") {
				t.Errorf("the image's user builder (1000) did not run the job:\n%s", out)
			}
			// Again, from the cache.
			out, errOut, code = d.berth("submit", "--wait", "--image", ref, "--", "echo again")
			if code != 0 || !strings.Contains(out, "again") || strings.Contains(out, "Pulled image") {
				t.Fatalf("second job: exit %d, want it from the cache:\n%s\n%s", code, out, errOut)
			}
			missing := host + "/nothing:1"
			out, errOut, code = d.berth("submit", "--wait", "--image", missing, "--", "true")
			if code == 0 || !strings.Contains(errOut+out, missing) {
				t.Fatalf("missing image: exit %d, want a failure naming %s:\n%s\n%s", code, missing, out, errOut)
			}
			// The job's own log says why, not only the job's record.
			if !strings.Contains(out, "ERROR: the job could not start: ") || !strings.Contains(out, "Pulling image "+missing) {
				t.Errorf("the log of a job whose pull failed does not say why:\n%s", out)
			}
			if jobs, _, _ := d.berth("jobs", "--json"); !strings.Contains(jobs, "image_pull_failure") {
				t.Errorf("the job list does not show image_pull_failure:\n%s", jobs)
			}
			// allowed_images applies to the pull on the host.
			forbidden := host + "/forbidden:1"
			out, errOut, code = d.berth("submit", "--wait", "--image", forbidden, "--", "true")
			if code == 0 || !strings.Contains(errOut+out, forbidden) || !strings.Contains(errOut+out, "allowed_images") {
				t.Fatalf("disallowed image: exit %d, want a failure naming %s and allowed_images:\n%s\n%s", code, forbidden, out, errOut)
			}
			if jobs, _, _ := d.berth("jobs", "--json"); strings.Count(jobs, "image_pull_failure") < 2 {
				t.Errorf("the job list does not show image_pull_failure twice:\n%s", jobs)
			}
			imageFilesOnlyInInstanceCaches(t, d.dir)
		})
	}
}

// imageFilesOnlyInInstanceCaches checks that the image's files were
// unpacked below an instance's image cache and nowhere else in berth's
// directory.
func imageFilesOnlyInInstanceCaches(t *testing.T, dir string) {
	t.Helper()
	found := 0
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.Name() != "os-release" {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		parts := strings.Split(rel, string(filepath.Separator))
		// state/provider/local/local/instances/ID/images/images/layers/HEX/etc/os-release
		if len(parts) != 12 || parts[4] != "instances" || parts[6] != "images" || parts[8] != "layers" {
			t.Errorf("image file outside an instance's cache: %s", rel)
		}
		found++
		return nil
	})
	if found == 0 {
		t.Errorf("no unpacked image below %s", dir)
	}
}
