package main

import (
	"fmt"
	"net"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/api"
)

// connFlags are how submit, jobs, logs and instances reach the server:
// where it is and which API token to send.
type connFlags struct {
	server    string
	token     string
	tokenFile string
	stateDir  string
}

func (f *connFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.server, "server", "", fmt.Sprintf("berth server URL (default $%s or %s)", api.ServerEnv, api.DefaultServer))
	fl.StringVar(&f.token, "token", "", fmt.Sprintf("API token (default $%s, else the api-token file of the state directory); other users see it in ps: prefer --token-file or $%s", api.TokenEnv, api.TokenEnv))
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the API token (mode 0600), instead of --token")
	fl.StringVar(&f.stateDir, "state-dir", "", "state directory of the local berth run whose api-token to send (default $"+stateDirEnv+", else ~/.local/state/berth when berth ran there, else "+installedStateDir+" when readable)")
}

// client returns an API client with the token from --token, --token-file, $BERTH_TOKEN or
// the state directory's api-token file. The file of the default state
// directory (localStateDir) is read only for a server on this machine, so a token never
// travels to a remote server nobody named it for; --state-dir names it
// explicitly.
func (f *connFlags) client() (*api.Client, error) {
	c := api.NewClient(f.server)
	dir := f.stateDir
	if dir == "" && isLocalServer(c.BaseURL) {
		dir = localStateDir()
	}
	flag := f.token
	if f.tokenFile != "" {
		if f.token != "" {
			return nil, fmt.Errorf("both --token and --token-file given: pass one (--token-file keeps the token out of ps)")
		}
		tok, err := api.ReadTokenFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		flag = tok
	}
	tok, err := api.ResolveToken(flag, dir)
	if err != nil {
		return nil, err
	}
	c.Token = tok
	return c, nil
}

// isLocalServer reports whether a server URL points at this machine.
func isLocalServer(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
