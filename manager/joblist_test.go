package manager

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// listedGitLabJob is a GitLab job that is only its ID, for the list.
type listedGitLabJob string

func (j listedGitLabJob) ID() string                             { return string(j) }
func (listedGitLabJob) Spec() jobsource.Spec                     { return jobsource.Spec{Script: "make"} }
func (listedGitLabJob) Log() io.Writer                           { return io.Discard }
func (listedGitLabJob) Started(string)                           {}
func (listedGitLabJob) Canceled() <-chan jobsource.CancelRequest { return nil }
func (listedGitLabJob) Finish(context.Context, jobsource.Result) error {
	return nil
}

// The admin's list merges the queue's jobs and the GitLab jobs berth
// took, paged together: following the cursors from the newest page, every
// job of both sources comes exactly once, and the pages put back together
// (oldest page first) give the order in which the jobs came, whatever the
// page size and however the two sources interleave.
func TestAdminListPagesQueueAndGitLabJobsTogether(t *testing.T) {
	s := newAPIServer(t)
	var want []string
	for i := range 11 {
		if i%3 == 0 || i == 10 { // two GitLab jobs in a row at the end
			id := fmt.Sprint(100 + i)
			s.m.glJobs.track(listedGitLabJob(id), time.Now())
			want = append(want, gitlabJobPrefix+id)
		} else {
			j, err := s.m.queue.Submit(api.JobRequest{Script: "true"})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, j.ID)
		}
		time.Sleep(2 * time.Millisecond) // distinct creation times, as jobs that come apart have
	}
	c := s.client(s.admin)
	for _, limit := range []int{1, 2, 3, 4, 11, 50} {
		var pages [][]string
		p := api.ListParams{Limit: limit}
		for range 20 {
			list, err := c.JobPage(context.Background(), p)
			if err != nil {
				t.Fatalf("limit %d: %v", limit, err)
			}
			var ids []string
			for _, j := range list.Jobs {
				ids = append(ids, j.ID)
			}
			if len(ids) > limit {
				t.Fatalf("limit %d: a page of %d jobs", limit, len(ids))
			}
			pages = append(pages, ids)
			if list.Next == "" {
				break
			}
			p.Cursor = list.Next
		}
		var got []string
		for _, ids := range slices.Backward(pages) {
			got = append(got, ids...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: pages %v put together give\n%v\nwant\n%v", limit, pages, got, want)
		}
	}
	all, err := c.AllJobs(context.Background(), "")
	if err != nil || len(all) != len(want) {
		t.Fatalf("AllJobs: %d jobs, %v; want %d", len(all), err, len(want))
	}
}
