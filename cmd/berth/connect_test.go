package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenFile: --token-file sends the file's token (so it stays out of
// ps), refuses a file others may read, and refuses --token beside it.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("brt_secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := connFlags{server: "http://127.0.0.1:1", tokenFile: file, stateDir: dir}
	c, err := f.client()
	if err != nil || c.Token != "brt_secret" {
		t.Fatalf("client() = %v, %v; want the file's token", c, err)
	}
	f.token = "other"
	if _, err := f.client(); err == nil || !strings.Contains(err.Error(), "both --token and --token-file") {
		t.Errorf("--token with --token-file: %v", err)
	}
	f.token = ""
	os.Chmod(file, 0o644)
	if _, err := f.client(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable token file: %v", err)
	}
}
