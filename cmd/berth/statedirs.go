package main

import (
	"os"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
)

// stateDirEnv names berth's state directory for the client commands and
// `berth token` when --state-dir is not given: the one place to say "the
// berth I mean keeps its state there".
const stateDirEnv = "BERTH_STATE_DIR"

// installedStateDir is the state directory of berth installed as a service
// (packaging/berth.service's StateDirectory=berth). A variable so that
// tests can point it elsewhere.
var installedStateDir = "/var/lib/berth"

// localStateDir returns the state directory of the berth on this machine a
// command means when none was named: $BERTH_STATE_DIR when set; else the
// user's default state directory when berth ran there (its api-token
// exists); else the installed service's, when its api-token can be read
// (root, or an account given access to it); else the user's default. So
// the quickstart's user finds their own berth and `sudo berth submit` finds
// the service's, and a user who can read neither gets the server's 401,
// which names the token file and the ways to pass a token.
func localStateDir() string {
	if d := os.Getenv(stateDirEnv); d != "" {
		return d
	}
	home := config.DefaultStateDir()
	if _, err := os.Stat(api.TokenPath(home)); err == nil {
		return home
	}
	if f, err := os.Open(api.TokenPath(installedStateDir)); err == nil {
		f.Close()
		return installedStateDir
	}
	return home
}
