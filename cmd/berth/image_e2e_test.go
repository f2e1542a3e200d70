package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/imagetest"
)

// TestSubmitWithImage is the user's path: `berth submit --image` runs the
// script in that image on a local instance; a missing image fails the job
// with image_pull_failure and a message naming the image.
func TestSubmitWithImage(t *testing.T) {
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	d := newDaemon(t, fmt.Sprintf("[autoscaler.provider_config]\nnetwork = \"host\"\n\n[images]\ninsecure_registries = [%q]\n", host))
	// The job's own /proc masks what the sandbox's does (the kernel command line).
	out, errOut, code := d.berth("submit", "--wait", "--image", ref, "--", "cat /etc/os-release; echo var=$IMAGE_VAR; echo cmdline=$(wc -c < /proc/cmdline)")
	if code != 0 || !strings.Contains(out, "NAME=berth-test-image") || !strings.Contains(out, "var=from-image") || !strings.Contains(out, "cmdline=0") {
		t.Fatalf("submit --image exited %d:\n%s\n%s", code, out, errOut)
	}
	missing := host + "/nothing:1"
	out, errOut, code = d.berth("submit", "--wait", "--image", missing, "--", "true")
	if code == 0 || !strings.Contains(errOut+out, missing) {
		t.Fatalf("missing image: exit %d, want a failure naming %s:\n%s\n%s", code, missing, out, errOut)
	}
	jobs, _, _ := d.berth("jobs", "--json")
	if !strings.Contains(jobs, "image_pull_failure") {
		t.Errorf("the job list does not show image_pull_failure:\n%s", jobs)
	}
}

// TestImagePickupFigures times `berth submit --wait` of a `true` job on a
// warm instance, with a cached image and without one (docs/images.md's
// figures). Skipped unless BERTH_IMAGE_PICKUP=1: it measures, it does not
// check.
func TestImagePickupFigures(t *testing.T) {
	if os.Getenv("BERTH_IMAGE_PICKUP") == "" {
		t.Skip("set BERTH_IMAGE_PICKUP=1 to measure")
	}
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	d := newDaemon(t, fmt.Sprintf("[autoscaler.provider_config]\nnetwork = \"host\"\n\n[images]\ninsecure_registries = [%q]\n", host))
	for _, args := range [][]string{{"submit", "--wait", "--", "true"}, {"submit", "--wait", "--image", ref, "--", "true"}} {
		d.berth(args...) // warm: instance up, image cached
		var took []time.Duration
		for range 20 {
			time.Sleep(500 * time.Millisecond)
			start := time.Now()
			if _, errOut, code := d.berth(args...); code != 0 {
				t.Fatalf("%v: exit %d %s", args, code, errOut)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		t.Logf("%v: p50 %v p90 %v", args, took[9].Round(time.Millisecond), took[17].Round(time.Millisecond))
	}
}
