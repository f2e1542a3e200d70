package queue_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
)

// TestEnvironmentKeyResumesOnlyForItsOwner: the key of an environment
// parked by alice's job resumes for alice and the admin, never for bob, and
// a key the manager does not know is refused before anything is queued.
func TestEnvironmentKeyResumesOnlyForItsOwner(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		parked := map[string]bool{}
		q := openQueue(t, t.TempDir(), queue.WithResumeCheck(func(key string) error {
			if !parked[key] {
				return &queue.RequestError{Status: http.StatusNotFound, Message: "no parked environment " + key}
			}
			return nil
		}))
		alice, bob := api.Principal{Name: "alice"}, api.Principal{Name: "bob"}
		admin := api.Principal{Name: api.AdminName, Admin: true}
		if _, err := q.SubmitAs(alice, api.JobRequest{Script: "make deps", Suspend: true}); err != nil {
			t.Fatal(err)
		}
		j := request(t, q)
		if err := j.Finish(context.Background(), jobsource.Result{EnvKey: "env-1"}); err != nil {
			t.Fatal(err)
		}
		parked["env-1"] = true
		if owner, known := q.EnvOwner("env-1"); !known || owner != "alice" {
			t.Fatalf("EnvOwner = %q, %v; want alice", owner, known)
		}

		var re *queue.RequestError
		if _, err := q.SubmitAs(bob, api.JobRequest{Script: "cat secrets", Resume: "env-1"}); !errors.As(err, &re) || re.Status != http.StatusForbidden {
			t.Errorf("bob resumes alice's environment: %v; want 403", err)
		}
		if _, err := q.SubmitAs(alice, api.JobRequest{Script: "true", Resume: "env-2"}); !errors.As(err, &re) || re.Status != http.StatusNotFound {
			t.Errorf("unknown key: %v; want the check's 404", err)
		}
		for _, p := range []api.Principal{alice, admin} {
			if _, err := q.SubmitAs(p, api.JobRequest{Script: "make test", Resume: "env-1"}); err != nil {
				t.Errorf("%s resumes: %v", p.Name, err)
			}
		}
		bobs, _ := q.ListFor(bob, "", 0)
		if len(bobs) != 0 {
			t.Errorf("bob lists %d jobs; he submitted none that were accepted", len(bobs))
		}
		all, _ := q.List("", 0)
		if len(all) != 3 {
			t.Errorf("%d jobs stored, want 3 (the refused ones are not)", len(all))
		}
	})
}

func TestHealthReportsAFullQueue(t *testing.T) {
	q := openQueue(t, t.TempDir(), queue.WithMaxDBSize(256<<10))
	if err := q.Health(); err != nil {
		t.Fatalf("fresh queue: %v", err)
	}
	big := make([]byte, 40<<10)
	for i := range big {
		big[i] = 'x'
	}
	for range 100 {
		if _, err := q.Submit(api.JobRequest{Script: "echo " + string(big)}); errors.Is(err, queue.ErrNoSpace) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Health(); err == nil {
		t.Fatal("Health = nil while submits fail for lack of space")
	}
}
