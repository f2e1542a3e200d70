package cache

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// newS3 starts a real S3 server in-process (gofakes3 speaks the S3 REST API
// that minio-go signs and sends) with one bucket.
func newS3(t *testing.T, max int64) *S3 {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("berth-cache"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	s, err := NewS3(S3Config{Endpoint: strings.TrimPrefix(srv.URL, "http://"), Bucket: "berth-cache", Prefix: "runner",
		AccessKey: "key", SecretKey: "secret", Region: "us-east-1", Insecure: true, MaxBytes: max}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestS3PutGetEvict(t *testing.T) {
	s := newS3(t, 25)
	ctx := context.Background()
	if _, err := s.Get(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	for _, k := range []string{"a", "b"} {
		if err := s.Put(ctx, k, strings.NewReader(strings.Repeat(k, 10))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // S3 times have second resolution: order the writes
	}
	rc, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != strings.Repeat("a", 10) {
		t.Fatalf("a holds %q", b)
	}
	if err := s.Put(ctx, "c", strings.NewReader(strings.Repeat("c", 10))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a (written first): %v, want evicted", err)
	}
	if _, err := s.Get(ctx, "c"); err != nil {
		t.Errorf("c: %v", err)
	}
	if err := s.Put(ctx, "huge", strings.NewReader(strings.Repeat("x", 30))); err == nil {
		t.Error("an archive over the bound was stored")
	}
}
