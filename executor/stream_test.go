package executor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
)

// Stream moves data both ways over one SSH session: a megabyte in on stdin,
// transformed, back on stdout, byte for byte; stderr and the exit code come
// back apart from it.
func TestStreamCarriesDataBothWays(t *testing.T) {
	s := newTestServer(t)
	data := bytes.Repeat([]byte("berth\x00artifact\n"), 1<<16)
	var out bytes.Buffer
	var r executor.Runner
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, stderr, err := r.Stream(ctx, s.connectInfo(), "cat; echo done >&2; exit 3", bytes.NewReader(data), &out)
	if err != nil || code != 3 || strings.TrimSpace(stderr) != "done" {
		t.Fatalf("Stream: code %d, stderr %q, err %v", code, stderr, err)
	}
	if sha256.Sum256(out.Bytes()) != sha256.Sum256(data) {
		t.Fatalf("%d bytes came back for %d sent, or different ones", out.Len(), len(data))
	}
}

func TestStreamCanceled(t *testing.T) {
	s := newTestServer(t)
	var r executor.Runner
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	code, _, err := r.Stream(ctx, s.connectInfo(), "sleep 30", nil, nil)
	if code != -1 || err == nil {
		t.Fatalf("a canceled transfer: code %d, err %v", code, err)
	}
}
