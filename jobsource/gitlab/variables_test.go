package gitlab

import "testing"

// CI_CONCURRENT_ID is the lowest number no running job of the source
// holds, CI_CONCURRENT_PROJECT_ID the lowest no running job of the same
// project holds; Finish frees them.
func TestConcurrentIDs(t *testing.T) {
	s := &Source{}
	type got struct{ all, project int }
	take := func(id, project int64) got {
		a, p := s.takeSlot(id, project)
		return got{a, p}
	}
	for _, c := range []struct {
		id, project int64
		want        got
	}{{1, 7, got{0, 0}}, {2, 7, got{1, 1}}, {3, 8, got{2, 0}}} {
		if g := take(c.id, c.project); g != c.want {
			t.Fatalf("job %d of project %d: %+v, want %+v", c.id, c.project, g, c.want)
		}
	}
	s.released(1)
	if g := take(4, 8); g != (got{0, 1}) {
		t.Fatalf("after job 1 ended, job 4 of project 8: %+v, want {0 1}", g)
	}
}
