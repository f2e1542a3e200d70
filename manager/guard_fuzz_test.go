package manager

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
)

// FuzzGuard: whatever path, Host, Content-Type and Authorization a request
// carries, the guard answers JSON, and a request reaches an endpoint other
// than /healthz or /metrics only with the right token, a known Host, a
// clean path and (for POST) a JSON body type.
func FuzzGuard(f *testing.F) {
	dir := f.TempDir()
	auth, err := newAuthenticator(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	tok, _ := api.ReadTokenFile(api.TokenPath(dir))
	for _, seed := range []struct{ method, path, host, ctype, authz string }{
		{"GET", "/api/v1/jobs", "127.0.0.1:8765", "", "Bearer " + tok},
		{"POST", "/api/v1/jobs", "localhost", "application/json", "Bearer " + tok},
		{"POST", "/api/v1/jobs", "localhost", "text/plain", "Bearer " + tok},
		{"GET", "/api/v1/jobs/../x", "localhost", "", ""},
		{"GET", "/healthz", "evil.example", "", ""},
		{"GET", "/metrics", "", "", "Basic Zm9vOmJhcg=="},
		{"DELETE", "//x/./y", "[::1]:1", "application/json;;", "bearer " + tok + "x"},
	} {
		f.Add(seed.method, seed.path, seed.host, seed.ctype, seed.authz)
	}
	f.Fuzz(func(t *testing.T, method, path, host, ctype, authz string) {
		reached := false
		g := &guard{auth: auth, hosts: newHostPolicy("127.0.0.1", nil), tokenFile: api.TokenPath(dir),
			next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = true
				w.WriteHeader(http.StatusNoContent)
			})}
		req, err := http.NewRequest("GET", "http://127.0.0.1/", nil)
		if err != nil {
			t.Skip()
		}
		req.Method, req.URL.Path, req.Host = method, path, host
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Authorization", authz)
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		if !reached {
			if rec.Code < 400 || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("refused with %d %q; want a JSON 4xx", rec.Code, rec.Header().Get("Content-Type"))
			}
			return
		}
		if path != cleanPath(path) {
			t.Fatalf("unclean path %q got through", path)
		}
		h := strings.ToLower(host)
		if host != "" && !strings.HasPrefix(h, "127.") && !strings.HasPrefix(h, "localhost") && !strings.HasPrefix(h, "[::1]") && !strings.HasPrefix(h, "::1") && !g.hosts.allowed(req) {
			t.Fatalf("host %q got through", host)
		}
		open := openPaths[path] && (method == "GET" || method == "HEAD")
		if !open && bearerToken(req) != tok {
			t.Fatalf("%s %s got through with Authorization %q", method, path, authz)
		}
		if method == "POST" && !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ctype)), "application/json") {
			t.Fatalf("POST with Content-Type %q got through", ctype)
		}
	})
}
