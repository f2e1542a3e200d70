package cache

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// The S3 cache without access_key and secret_key takes AWS's default
// credential chain (issue 42, item 8: most AWS runners use the instance's
// role). No test reaches the real metadata address: the chain's instance
// metadata service is a fake on loopback, and the environment the chain
// reads is set by each test.

// signedS3 is an S3 server that records the access key and session token
// each request was signed with.
type signedS3 struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys []string // "AKID token"
}

func newSignedS3(t *testing.T) *signedS3 {
	backend := s3mem.New()
	if err := backend.CreateBucket("berth-cache"); err != nil {
		t.Fatal(err)
	}
	s := &signedS3{}
	h := gofakes3.New(backend).Server()
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
		akid, _, _ := strings.Cut(cred, "/")
		s.mu.Lock()
		s.keys = append(s.keys, akid+" "+r.Header.Get("X-Amz-Security-Token"))
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// imds is the EC2 instance metadata service's role credentials, as AWS
// documents them (IMDSv2: a PUT for a session token first; then the role
// name and its credentials under /latest/meta-data/iam/security-credentials/).
func imds(t *testing.T, calls *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			io.WriteString(w, "imds-session")
		case r.Header.Get("X-Aws-Ec2-Metadata-Token") != "imds-session":
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
			io.WriteString(w, "berth-runner-role")
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/berth-runner-role":
			_ = json.NewEncoder(w).Encode(map[string]string{"Code": "Success", "Type": "AWS-HMAC",
				"AccessKeyId": "ASIAROLE", "SecretAccessKey": "role-secret", "Token": "role-session-token",
				"Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "LastUpdated": time.Now().UTC().Format(time.RFC3339)})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// quietAWSEnv clears what the chain reads, so that the test decides.
func quietAWSEnv(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN",
		"AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_REGION"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "no-credentials"))
}

// keysUsed puts and gets one archive through an S3 cache with no keys
// configured, and returns the access key and session token ("AKID token")
// of each request, and how often the metadata service was asked.
func keysUsed(t *testing.T) ([]string, int32) {
	t.Helper()
	var calls atomic.Int32
	meta := imds(t, &calls)
	s3 := newSignedS3(t)
	s, err := NewS3(S3Config{Endpoint: strings.TrimPrefix(s3.srv.URL, "http://"), Bucket: "berth-cache", Region: "us-east-1",
		Insecure: true, IMDSEndpoint: meta.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "gitlab/x/project/1/k", strings.NewReader("zip")); err != nil {
		t.Fatal(err)
	}
	rc, err := s.Get(ctx, "gitlab/x/project/1/k")
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	s3.mu.Lock()
	defer s3.mu.Unlock()
	if len(s3.keys) == 0 {
		t.Fatal("no request reached S3")
	}
	return append([]string(nil), s3.keys...), calls.Load()
}

func TestS3CredentialsFromTheInstanceRole(t *testing.T) {
	quietAWSEnv(t)
	keys, calls := keysUsed(t)
	for _, k := range keys {
		if k != "ASIAROLE role-session-token" {
			t.Errorf("a request signed with %q, want the role's key and session token", k)
		}
	}
	if calls == 0 {
		t.Error("the metadata service was not asked")
	}
}

func TestS3CredentialsFromTheEnvironmentFirst(t *testing.T) {
	quietAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	keys, calls := keysUsed(t)
	if keys[0] != "AKIAENV " || calls != 0 {
		t.Errorf("signed with %q after %d metadata calls; want the environment's key and no metadata call", keys, calls)
	}
}

func TestS3OneKeyWithoutTheOtherRefused(t *testing.T) {
	if _, err := NewS3(S3Config{Endpoint: "127.0.0.1:1", Bucket: "b", AccessKey: "k"}, nil); err == nil || !strings.Contains(err.Error(), "both access_key and secret_key") {
		t.Errorf("NewS3 with an access key alone: %v", err)
	}
}
