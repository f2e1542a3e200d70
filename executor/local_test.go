//go:build linux

package executor_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/provider"
)

// replyingSandbox is a local exec socket whose init process answers every
// command with reply and then closes the command's socket. Real sandboxes
// are in provider/local's tests; this one sends what no sandbox should.
type replyingSandbox struct{ reply [][]byte }

func (s replyingSandbox) SendExec(_ []byte, fds []int) error {
	for _, fr := range s.reply {
		if err := unix.Sendmsg(fds[0], fr, nil, nil, 0); err != nil {
			return err
		}
	}
	return nil
}

func localInfo(reply ...[]byte) provider.ConnectInfo {
	// No SSH address, key or user: only the local path can work.
	return provider.ConnectInfo{ID: "local-0123456789", Local: replyingSandbox{reply}}
}

func TestLocalPathGarbageIsASystemErrorNamingTheInstance(t *testing.T) {
	for name, fr := range map[string][]byte{
		"unknown frame":  {42, 'x'},
		"exit too large": {3, 0, 0, 1, 0},
		"short signal":   {4, 9},
	} {
		t.Run(name, func(t *testing.T) {
			code, err := executor.Run(context.Background(), localInfo([]byte{1, 'h', 'i'}, fr), executor.Command{Script: "true"})
			var se *executor.SystemError
			if code != -1 || !errors.As(err, &se) || se.Instance != "local-0123456789" || se.Op != "local exec" {
				t.Fatalf("Run: %d %v, want a *SystemError for local-0123456789", code, err)
			}
			if !strings.Contains(err.Error(), "malformed reply") {
				t.Errorf("message %q does not say what was wrong", err)
			}
		})
	}
}

func TestLocalPathClosedWithoutExitIsALostConnection(t *testing.T) {
	var out strings.Builder
	code, err := executor.Run(context.Background(), localInfo([]byte{1, 'h', 'i'}), executor.Command{Script: "true", Output: &out})
	var se *executor.SystemError
	if code != -1 || !errors.As(err, &se) || se.Op != "connection lost" || out.String() != "hi" {
		t.Fatalf("Run: %d %v (output %q), want 'connection lost'", code, err, out.String())
	}
}

func TestLocalPathExitCodesAndStartFailure(t *testing.T) {
	if code, err := executor.Run(context.Background(), localInfo([]byte{3, 0, 0, 0, 4}), executor.Command{Script: "exit 4"}); code != 4 || err != nil {
		t.Fatalf("exit 4: %d %v", code, err)
	}
	if code, err := executor.Run(context.Background(), localInfo([]byte{4, 0, 0, 0, 15}), executor.Command{Script: "true"}); code != 143 || err != nil {
		t.Fatalf("killed by TERM: %d %v, want 143", code, err)
	}
	out, err := executor.Output(context.Background(), localInfo([]byte{2, 'e'}, []byte{3, 0, 0, 0, 1}), "false", 0)
	var ee *executor.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || string(out) != "e" {
		t.Fatalf("Output: %q %v, want an ExitError with code 1", out, err)
	}
	_, err = executor.Run(context.Background(), localInfo(append([]byte{5}, "cannot fork"...)), executor.Command{Script: "true"})
	var se *executor.SystemError
	if !errors.As(err, &se) || se.Op != "start script" || !strings.Contains(err.Error(), "cannot fork") {
		t.Fatalf("start failure: %v", err)
	}
}

// goneSandbox is a local exec handle whose provider holds no socket to
// the instance any more.
type goneSandbox struct{}

func (goneSandbox) SendExec([]byte, []int) error { return provider.ErrLocalExecUnavailable }

func TestLocalPathUnavailableFallsBackToSSH(t *testing.T) {
	srv := newTestServer(t)
	ci := srv.connectInfo()
	ci.Local = goneSandbox{}
	var out strings.Builder
	code, err := executor.Run(context.Background(), ci, executor.Command{Script: "echo over ssh; exit 3", Output: &out})
	if err != nil || code != 3 || out.String() != "over ssh\n" {
		t.Fatalf("Run: %d %v %q, want exit 3 over SSH", code, err, out.String())
	}
	var r executor.Runner
	var got strings.Builder
	code, _, err = r.Stream(context.Background(), ci, "cat", strings.NewReader("data"), &got)
	if err != nil || code != 0 || got.String() != "data" {
		t.Fatalf("Stream: %d %v %q", code, err, got.String())
	}
}
