package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// runAs runs the berth CLI with exactly env (plus PATH) and returns stdout,
// stderr and the exit code; prefix runs it through another command.
func runAs(t *testing.T, env []string, prefix []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	argv := append(append(append([]string{}, prefix...), berthBin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("berth %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// TestQuickstartFindsTheTokenByItself is the README's two commands with no
// config, no flag and no $BERTH_TOKEN: `berth run` creates the token in the
// default state directory and `berth submit` of the same user finds it
// there. (Only --listen and $BERTH_SERVER differ, to stay off port 8765.)
func TestQuickstartFindsTheTokenByItself(t *testing.T) {
	home := t.TempDir()
	listen := freeAddr(t)
	env := []string{"HOME=" + home}
	log := &syncBuffer{}
	run := exec.Command(berthBin, "run", "--listen", listen)
	run.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	run.Stdout, run.Stderr = log, log
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { run.Wait(); close(done) }()
	stateDir := filepath.Join(home, ".local", "state", "berth")
	t.Cleanup(func() {
		run.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			run.Process.Kill()
			<-done
		}
		removeSandboxes(t, filepath.Join(stateDir, "provider", "local"))
		if t.Failed() {
			t.Logf("berth log:\n%s", log)
		}
	})
	waitFor(t, 30*time.Second, "berth to serve /healthz", func() bool {
		resp, err := healthClient.Get("http://" + listen + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	fi, err := os.Stat(filepath.Join(stateDir, "api-token"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file in the default state dir: %v (mode %v); want mode 0600", err, fi.Mode())
	}
	client := append(env, api.ServerEnv+"=http://"+listen)
	out, errOut, code := runAs(t, client, nil, "submit", "--wait", "--", "echo hello from $(hostname)")
	if code != 0 || !strings.HasPrefix(out, "hello from local-") {
		t.Fatalf("quickstart submit: exit %d, out %q, err %q", code, out, errOut)
	}
	// Another home (another user's default state dir) has no token for this berth.
	_, errOut, code = runAs(t, []string{"HOME=" + t.TempDir(), api.ServerEnv + "=http://" + listen}, nil, "jobs")
	if code == 0 || !strings.Contains(errOut, "no API token") || !strings.Contains(errOut, api.TokenEnv) {
		t.Errorf("jobs without a token: exit %d, %q; want a refusal that says how to pass a token", code, errOut)
	}
}

// TestAnotherLocalUserCannotSubmit: berth runs as root; user nobody on the
// same machine reaches its port but cannot read its token, so it can
// neither submit a job (which would run as root's berth) nor read one.
func TestAnotherLocalUserCannotSubmit(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) is needed to act as another user; .ci/run installs it")
	}
	if os.Getuid() != 0 {
		t.Skip("needs root to act as another user") // berth's own CI runs as root
	}
	d := newDaemon(t, "")
	nobody := []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}
	server := api.ServerEnv + "=http://" + d.listen
	stateDir := filepath.Join(d.dir, "state")
	attempts := []struct {
		name string
		args []string
		says string
	}{
		{"no token", []string{"submit", "--", "id"}, "no API token"},
		{"guessed token", []string{"submit", "--token", "berth_guess", "--", "id"}, "not valid"},
		{"root's state dir", []string{"submit", "--state-dir", stateDir, "--", "id"}, "permission denied"},
		{"read jobs", []string{"jobs"}, "no API token"},
	}
	for _, a := range attempts {
		_, errOut, code := runAs(t, []string{"HOME=/nonexistent", server}, nobody, a.args...)
		if code == 0 || !strings.Contains(errOut, a.says) {
			t.Errorf("nobody, %s: exit %d, %q; want a refusal saying %q", a.name, code, errOut, a.says)
		}
	}
	jobs, err := d.client().Jobs(context.Background())
	if err != nil || len(jobs) != 0 {
		t.Errorf("jobs after nobody's attempts: %v, %v; want none", jobs, err)
	}
}

// TestEnvironmentKeysBelongToTheirSubmitter: alice parks an environment;
// bob, another submitter of the same berth, never learns its key from any
// listing and cannot resume it even with the key; alice can.
func TestEnvironmentKeysBelongToTheirSubmitter(t *testing.T) {
	d := newDaemon(t, "")
	stateDir := filepath.Join(d.dir, "state")
	tokens := map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		out, errOut, code := runAs(t, nil, nil, "token", "add", name, "--state-dir", stateDir)
		if code != 0 || !strings.HasPrefix(out, "berth_") {
			t.Fatalf("berth token add %s: exit %d, %q %q", name, code, out, errOut)
		}
		tokens[name] = strings.TrimSpace(out)
	}
	if _, errOut, code := runAs(t, nil, nil, "token", "add", "alice", "--state-dir", stateDir); code == 0 || !strings.Contains(errOut, "already has a token") {
		t.Errorf("second token add alice: exit %d, %q; want a refusal", code, errOut)
	}
	as := func(who string, args ...string) (string, string, int) {
		return runAs(t, []string{api.ServerEnv + "=http://" + d.listen, api.TokenEnv + "=" + tokens[who]}, nil, args...)
	}
	_, errOut, code := as("alice", "submit", "--wait", "--suspend", "--", "echo alices-secret > /berth/secret")
	m := regexp.MustCompile(`environment key: (\S+)`).FindStringSubmatch(errOut)
	if code != 0 || m == nil {
		t.Fatalf("alice's --suspend: exit %d, %q", code, errOut)
	}
	key := m[1]
	for _, list := range [][]string{{"instances", "--json"}, {"jobs", "--json"}, {"jobs", "1", "--json"}} {
		out, _, _ := as("bob", list...)
		if strings.Contains(out, key) {
			t.Errorf("bob's `berth %s` shows alice's environment key:\n%s", strings.Join(list, " "), out)
		}
	}
	if out, _, _ := as("alice", "instances", "--json"); !strings.Contains(out, key) {
		t.Errorf("alice's `berth instances` lacks her own environment key:\n%s", out)
	}
	_, errOut, code = as("bob", "submit", "--wait", "--resume", key, "--", "cat /berth/secret")
	if code == 0 || !strings.Contains(errOut, "another submitter") {
		t.Errorf("bob resumes alice's environment: exit %d, %q; want a refusal", code, errOut)
	}
	out, errOut, code := as("alice", "submit", "--wait", "--resume", key, "--", "cat /berth/secret")
	if code != 0 || strings.TrimSpace(out) != "alices-secret" {
		t.Errorf("alice resumes her environment: exit %d, out %q, err %q", code, out, errOut)
	}
	// Revoking works at once, without a restart.
	if _, errOut, code := runAs(t, nil, nil, "token", "remove", "bob", "--state-dir", stateDir); code != 0 {
		t.Fatalf("berth token remove bob: %s", errOut)
	}
	if _, errOut, code := as("bob", "jobs"); code == 0 || !strings.Contains(errOut, "not valid") {
		t.Errorf("bob after his token was removed: exit %d, %q; want 401", code, errOut)
	}
}

// TestAJobCannotUseTheAPI: a job that finds berth's port (on the shared
// host network, or not at all when the sandbox has its own) and tries the
// token file gets no job list and submits nothing.
func TestAJobCannotUseTheAPI(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed; the job would have no HTTP client")
	}
	d := newDaemon(t, "")
	tokenFile := api.TokenPath(filepath.Join(d.dir, "state"))
	script := strings.Join([]string{
		`tok=$(cat ` + tokenFile + ` 2>/dev/null)`,
		`curl -s -m 5 -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' -d '{"script": "echo planted"}' http://` + d.listen + `/api/v1/jobs; echo " submit-tried"`,
		`curl -s -m 5 -H "Authorization: Bearer $tok" http://` + d.listen + `/api/v1/jobs; echo " list-tried"`,
	}, "\n")
	out, errOut, code := d.berth("submit", "--wait", "--", script)
	if code != 0 || !strings.Contains(out, "list-tried") {
		t.Fatalf("the attacking job did not run to its end: exit %d, %q, %q", code, out, errOut)
	}
	if strings.Contains(out, `"jobs"`) || strings.Contains(out, `"state": "queued"`) {
		t.Errorf("the job reached the API:\n%s", out)
	}
	jobs, err := d.client().Jobs(context.Background())
	if err != nil || len(jobs) != 1 {
		t.Errorf("jobs after the attack: %d, %v; want only the attacking job", len(jobs), err)
	}
	t.Logf("what the job got:\n%s", out)
}
