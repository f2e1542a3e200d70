package api_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-ci/berth/api"
)

func TestEnsureTokenFileCreatesOnePrivateToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), api.TokenFileName)
	// Daemons starting at once must agree on one token, each fully written.
	const n = 8
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := api.EnsureTokenFile(path)
			if err != nil {
				t.Error(err)
			}
			got[i] = tok
		}()
	}
	wg.Wait()
	for _, tok := range got {
		if tok != got[0] || !strings.HasPrefix(tok, "berth_") || len(tok) < 40 {
			t.Fatalf("tokens %q: want one berth_ token of 256 bits", got)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, %v; want 0600", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left beside the token: %v", entries)
	}
	again, err := api.EnsureTokenFile(path)
	if err != nil || again != got[0] {
		t.Errorf("second start: %q, %v; want the same token", again, err)
	}
}

func TestReadTokenFileRefusesWhatOthersMayRead(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("berth_x\n"), 0o644)
	os.Chmod(open, 0o644)
	if _, err := api.ReadTokenFile(open); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("mode 0644: %v; want a refusal saying chmod 600", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if _, err := api.ReadTokenFile(empty); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v", err)
	}
}

func TestResolveTokenOrder(t *testing.T) {
	dir := t.TempDir()
	if _, err := api.EnsureTokenFile(api.TokenPath(dir)); err != nil {
		t.Fatal(err)
	}
	fromFile, _ := api.ReadTokenFile(api.TokenPath(dir))
	t.Setenv(api.TokenEnv, "")
	if tok, err := api.ResolveToken("", dir); err != nil || tok != fromFile {
		t.Errorf("from the state dir: %q, %v", tok, err)
	}
	t.Setenv(api.TokenEnv, "berth_env")
	if tok, _ := api.ResolveToken("", dir); tok != "berth_env" {
		t.Errorf("$BERTH_TOKEN should beat the file: %q", tok)
	}
	if tok, _ := api.ResolveToken("berth_flag", dir); tok != "berth_flag" {
		t.Errorf("--token should beat everything: %q", tok)
	}
	t.Setenv(api.TokenEnv, "")
	if tok, err := api.ResolveToken("", t.TempDir()); tok != "" || err != nil {
		t.Errorf("no token anywhere: %q, %v; want none and no error (the server's 401 explains)", tok, err)
	}
}
