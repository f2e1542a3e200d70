package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-ci/berth/api"
)

// writeToken writes tok as dir's api-token, as berth run does.
func writeToken(t *testing.T, dir, tok string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(api.TokenPath(dir), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// After `sudo ./install.sh` the service keeps its token in /var/lib/berth;
// the CLI on the same machine must find it without flags, and still
// prefer the user's own berth (the quickstart's) when that one ran.
func TestClientFindsTheInstalledServicesToken(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv(api.TokenEnv, "")
	t.Setenv(api.ServerEnv, "")
	t.Setenv(stateDirEnv, "")
	installed := filepath.Join(t.TempDir(), "var-lib-berth")
	defer func(old string) { installedStateDir = old }(installedStateDir)
	installedStateDir = installed

	token := func() string {
		t.Helper()
		c, err := (&connFlags{}).client()
		if err != nil {
			t.Fatal(err)
		}
		return c.Token
	}
	if tok := token(); tok != "" {
		t.Fatalf("no berth ran anywhere, yet the client sends token %q", tok)
	}
	writeToken(t, installed, "service-token")
	if tok := token(); tok != "service-token" {
		t.Errorf("with only the installed service's token, the client sends %q, want the service's", tok)
	}
	writeToken(t, filepath.Join(home, ".local/state/berth"), "my-token")
	if tok := token(); tok != "my-token" {
		t.Errorf("with the user's own berth's token too, the client sends %q, want the user's", tok)
	}
	other := filepath.Join(t.TempDir(), "other")
	writeToken(t, other, "named-token")
	t.Setenv(stateDirEnv, other)
	if tok := token(); tok != "named-token" {
		t.Errorf("with $%s set, the client sends %q, want that directory's token", stateDirEnv, tok)
	}
	// A remote server never gets a local token nobody named for it.
	t.Setenv(stateDirEnv, "")
	c, err := (&connFlags{server: "https://ci.example.com:8765"}).client()
	if err != nil || c.Token != "" {
		t.Errorf("a remote server gets token %q (err %v); want none", c.Token, err)
	}
}

// A user who may not read the service's token gets no error from the CLI:
// the request goes without one and the server's 401 says what to do.
func TestClientSkipsAnUnreadableInstalledToken(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file: needs an unprivileged user")
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv(api.TokenEnv, "")
	t.Setenv(stateDirEnv, "")
	installed := filepath.Join(t.TempDir(), "var-lib-berth")
	writeToken(t, installed, "service-token")
	os.Chmod(installed, 0o000)
	defer os.Chmod(installed, 0o700)
	defer func(old string) { installedStateDir = old }(installedStateDir)
	installedStateDir = installed
	c, err := (&connFlags{}).client()
	if err != nil || c.Token != "" {
		t.Errorf("token %q, err %v; want no token and no error", c.Token, err)
	}
}
