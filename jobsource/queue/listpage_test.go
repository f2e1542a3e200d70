package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/berth-ci/berth/api"
)

// Issue 43, item 8: a listing is one page of at most api.MaxListLimit
// jobs, whatever ?limit asks (0 was "all": 28.8 MB for one call with
// 5,401 jobs), with a cursor to the older ones; following the cursors
// lists every job once, in order.
func TestListingIsPagedWithAMaximum(t *testing.T) {
	{ // bbolt: the etcd backend shares the listing's code (Page, Load)
		q := openQueue(t, t.TempDir())
		srv, c := serve(t, q)
		const total = api.MaxListLimit + 205
		var wg sync.WaitGroup
		errs := make(chan error, total)
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < total; i += 16 {
					if _, err := q.Submit(api.JobRequest{Script: fmt.Sprint("echo ", i)}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		request(t, q) // job 1 runs: one job in another state

		get := func(query string) (api.JobList, int) {
			t.Helper()
			resp, err := http.Get(srv.URL + "/api/v1/jobs" + query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var list api.JobList
			if resp.StatusCode == http.StatusOK {
				if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
			}
			return list, resp.StatusCode
		}
		// IDs from..to, oldest first.
		wantRange := func(what string, list api.JobList, from, to int) {
			t.Helper()
			if len(list.Jobs) != to-from+1 {
				t.Fatalf("%s: %d jobs, want %d (%d..%d)", what, len(list.Jobs), to-from+1, from, to)
			}
			for i, j := range list.Jobs {
				if j.ID != strconv.Itoa(from+i) {
					t.Fatalf("%s: job %d is %s, want %d: the newest, oldest first", what, i, j.ID, from+i)
				}
			}
		}
		for _, query := range []string{"?limit=0", "?limit=5000", "?limit=" + strconv.Itoa(api.MaxListLimit)} {
			list, status := get(query)
			if status != http.StatusOK {
				t.Fatalf("%s: %d", query, status)
			}
			wantRange(query, list, total-api.MaxListLimit+1, total)
			if list.Next == "" {
				t.Fatalf("%s: no next cursor with %d older jobs", query, total-api.MaxListLimit)
			}
			older, status := get(query + "&cursor=" + list.Next)
			if status != http.StatusOK {
				t.Fatalf("%s, next page: %d", query, status)
			}
			wantRange(query+", next page", older, 1, total-api.MaxListLimit)
			if older.Next != "" {
				t.Fatalf("%s: the last page has a next cursor %q", query, older.Next)
			}
		}
		if list, _ := get(""); len(list.Jobs) != 100 || list.Next == "" {
			t.Fatalf("no ?limit: %d jobs, next %q; want the default page of 100 and a cursor", len(list.Jobs), list.Next)
		}
		if _, status := get("?cursor=x"); status != http.StatusBadRequest {
			t.Fatalf("?cursor=x: %d, want 400", status)
		}
		// Small pages with a filter, followed by the client to the end.
		queued, err := c.AllJobs(context.Background(), api.JobQueued)
		if err != nil {
			t.Fatal(err)
		}
		if len(queued) != total-1 || queued[0].ID != "2" || queued[len(queued)-1].ID != strconv.Itoa(total) {
			t.Fatalf("every queued job, page by page: %d jobs (%s..%s), want %d (2..%d)", len(queued), queued[0].ID, queued[len(queued)-1].ID, total-1, total)
		}
		seen := map[string]bool{}
		p := api.ListParams{State: api.JobQueued, Limit: 7}
		for pages := 0; ; pages++ {
			list, err := c.JobPage(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Jobs) > 7 {
				t.Fatalf("page of %d, want at most 7", len(list.Jobs))
			}
			for _, j := range list.Jobs {
				if seen[j.ID] || j.State != api.JobQueued {
					t.Fatalf("job %s (%s) listed twice or in the wrong state", j.ID, j.State)
				}
				seen[j.ID] = true
			}
			if list.Next == "" {
				break
			}
			p.Cursor = list.Next
		}
		if len(seen) != total-1 {
			t.Fatalf("pages of 7 listed %d queued jobs, want %d", len(seen), total-1)
		}
	}
}
