package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 32, item 1, for a single manager: state.db moved aside (or
// replaced by another fleet's) is not a new fleet: berth refuses to start
// and says what to do, without writing state.db.bak; `berth state
// new-fleet` is the explicit way on.
func TestReplacedStateDBIsNotANewFleet(t *testing.T) {
	d := newDaemon(t, "")
	d.stop()
	stateDir := filepath.Join(d.dir, "state")
	db := filepath.Join(stateDir, "state.db")
	bak, _ := os.ReadFile(db + ".bak")
	if err := os.Rename(db, db+".aside"); err != nil {
		t.Fatal(err)
	}
	os.Remove(db + ".bak") // gone with it: a lost disk, a replaced directory
	// Before issue 32 berth started with an empty state and ran on: the
	// timeout stops it, and the output lacks the refusal.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, berthBin, "run", "--config", filepath.Join(d.dir, "berth.toml")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "new-fleet") || !strings.Contains(string(out), "refuses to start") {
		t.Fatalf("berth run with state.db gone: %v\n%s", err, out)
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("the refused start created a state.db")
	}
	if b, _ := os.ReadFile(db + ".bak"); len(b) > 0 && string(b) != string(bak) {
		t.Errorf("the refused start wrote state.db.bak")
	}
	if out, errOut, code := d.berth("state", "new-fleet", "--state-dir", stateDir); code != 0 {
		t.Fatalf("berth state new-fleet: %d %s%s", code, out, errOut)
	}
	d.start()
	if out, errOut, code := d.berth("submit", "--wait", "--", "echo new fleet"); code != 0 || out != "new fleet\n" {
		t.Errorf("a job in the new fleet: exit %d %q %s", code, out, errOut)
	}
}
