package queue_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
)

func TestImageAndServicesReachTheJob(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		_, c := serve(t, q)
		sub := submit(t, c, api.JobRequest{
			Script:   "go test ./...",
			Image:    &api.Image{Name: "golang:1.22", Entrypoint: []string{""}},
			Services: []api.Service{{Name: "postgres:16", Alias: "db", Command: []string{"postgres", "-F"}}},
		})
		if sub.Image == nil || sub.Image.Name != "golang:1.22" || len(sub.Services) != 1 || sub.Services[0].Alias != "db" {
			t.Fatalf("submitted job echoes image %+v services %+v", sub.Image, sub.Services)
		}
		spec := request(t, q).Spec()
		if spec.Image == nil || spec.Image.Name != "golang:1.22" || len(spec.Image.Entrypoint) != 1 {
			t.Fatalf("Spec image = %+v", spec.Image)
		}
		if len(spec.Services) != 1 || spec.Services[0].Name != "postgres:16" || spec.Services[0].Alias != "db" || spec.Services[0].Command[1] != "-F" {
			t.Fatalf("Spec services = %+v", spec.Services)
		}
	})
}

func TestImageAsAPlainStringAndBadNames(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		srv, _ := serve(t, q)
		post := func(body string) (int, string) {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/api/v1/jobs", bytes.NewBufferString(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			return resp.StatusCode, b.String()
		}
		if code, body := post(`{"script":"true","image":"alpine:3"}`); code/100 != 2 || !strings.Contains(body, `"name": "alpine:3"`) {
			t.Fatalf("plain string image: %d %s", code, body)
		}
		if code, body := post(`{"script":"true","image":{"name":"UPPER/case"}}`); code != http.StatusBadRequest || !strings.Contains(body, "UPPER/case") {
			t.Fatalf("bad image name: %d %s", code, body)
		}
	})
}
