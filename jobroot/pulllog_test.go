package jobroot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/images"
	"github.com/berth-ci/berth/jobroot"
)

// A fast pull is one line; a slow one gets a line per layer as it
// completes and one per interval for a layer still downloading.
func TestPullLogShowsSlowPullsLayerByLayer(t *testing.T) {
	var out strings.Builder
	now := time.Unix(1000, 0)
	l := jobroot.NewPullLog(&out, "on the host")
	l.Now = func() time.Time { return now }
	const d1, d2 = "sha256:aaaaaaaaaaaabbbbbbbbbbbb", "sha256:ccccccccccccdddddddddddd"
	ev := func(after time.Duration, p images.PullProgress) {
		now = now.Add(after)
		p.Image, p.Count = "reg/x:1", 2
		l.Event(p)
	}
	ev(0, images.PullProgress{})
	ev(time.Second, images.PullProgress{Layer: d1, Index: 1, Read: 1e6, Size: 4e6})
	ev(0, images.PullProgress{Layer: d1, Index: 1, Read: 4e6, Size: 4e6, Done: true})
	if got := out.String(); got != "Pulling image reg/x:1 on the host\n" {
		t.Fatalf("a pull under Quiet logged:\n%s", got)
	}
	ev(2*time.Second, images.PullProgress{Layer: d2, Index: 2, Read: 1e6, Size: 50e6})
	ev(time.Second, images.PullProgress{Layer: d2, Index: 2, Read: 2e6, Size: 50e6})
	ev(5*time.Second, images.PullProgress{Layer: d2, Index: 2, Read: 30e6, Size: 50e6})
	ev(time.Second, images.PullProgress{Layer: d2, Index: 2, Read: 50e6, Size: 50e6, Done: true})
	want := "Pulling image reg/x:1 on the host\n" +
		"  layer 2/2 cccccccccccc: 1.0 MB of 50.0 MB\n" +
		"  layer 2/2 cccccccccccc: 30.0 MB of 50.0 MB\n" +
		"  layer 2/2 cccccccccccc: done, 50.0 MB\n"
	if got := out.String(); got != want {
		t.Fatalf("slow pull logged:\n%s\nwant:\n%s", got, want)
	}
}
