package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
)

func TestResolveServer(t *testing.T) {
	t.Setenv(api.ServerEnv, "")
	if got := api.ResolveServer(""); got != api.DefaultServer {
		t.Errorf("default = %q", got)
	}
	t.Setenv(api.ServerEnv, "10.0.0.1:9000/")
	if got := api.ResolveServer(""); got != "http://10.0.0.1:9000" {
		t.Errorf("from env = %q", got)
	}
	if got := api.ResolveServer("https://berth.example.com"); got != "https://berth.example.com" {
		t.Errorf("flag wins = %q", got)
	}
}

func TestClientErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, http.StatusNotFound, "job \""+r.PathValue("id")+"\" not found: list jobs with `berth jobs`")
	})
	mux.HandleFunc("GET /api/v1/jobs", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream broke", http.StatusBadGateway) // a proxy, not berth
	})
	mux.HandleFunc("GET /api/v1/instances", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`[{"id": "i-1", "state": "running", "slots": {"idle": 2}}]`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := api.NewClient(srv.URL)
	ctx := context.Background()

	_, err := c.Job(ctx, "7")
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || err.Error() != "job \"7\" not found: list jobs with `berth jobs`" {
		t.Errorf("Job = %v, want the server's message as a 404 *api.Error", err)
	}
	_, err = c.Jobs(ctx)
	if !errors.As(err, &apiErr) || apiErr.Status != 502 || !strings.Contains(err.Error(), "upstream broke") {
		t.Errorf("Jobs = %v, want a 502 *api.Error quoting the body", err)
	}
	list, err := c.Instances(ctx)
	if err != nil || len(list) != 1 || list[0].Slots.Idle != 2 || list[0].Slots.Total() != 2 {
		t.Errorf("Instances from a bare array = %+v, %v", list, err)
	}
}

// A standby answers 503 with Retry-After while no manager leads: it passed
// nothing on, so the client sends the same request again and the submit
// lands once a leader answers. A 503 without Retry-After (the queue cannot
// write) is the server's answer and is not retried.
func TestClientRetriesWhileNoManagerLeads(t *testing.T) {
	var bodies []string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		if len(bodies) == 1 {
			w.Header().Set("Retry-After", "0")
			api.WriteError(w, http.StatusServiceUnavailable, "no berth manager leads the fleet yet")
			return
		}
		w.Write([]byte(`{"id": "1", "state": "queued"}`))
	})
	mux.HandleFunc("GET /api/v1/jobs", func(w http.ResponseWriter, _ *http.Request) {
		api.WriteError(w, http.StatusServiceUnavailable, "cannot write the queue database")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := api.NewClient(srv.URL)

	j, err := c.Submit(context.Background(), api.JobRequest{Script: "true"})
	if err != nil || j.ID != "1" {
		t.Fatalf("Submit = %+v, %v; want job 1 after one retry", j, err)
	}
	if len(bodies) != 2 || bodies[0] != bodies[1] || !strings.Contains(bodies[0], `"true"`) {
		t.Errorf("requests = %q, want the same body twice", bodies)
	}
	var apiErr *api.Error
	if _, err := c.Jobs(context.Background()); !errors.As(err, &apiErr) || apiErr.Status != 503 {
		t.Errorf("Jobs = %v, want the 503 at once", err)
	}
}
