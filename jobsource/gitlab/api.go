package gitlab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The JSON shapes below mirror GitLab's runner API v4 (served by
// lib/api/ci/runner.rb in gitlab-org/gitlab, used by the types in
// common/network.go of gitlab-org/gitlab-runner); only the fields a shell job
// needs are decoded.

// featuresInfo is what the runner tells GitLab it can do, under GitLab
// Runner's names (common/network.go FeaturesInfo). GitLab gives a job only
// to a runner that advertises what the job needs (Ci::Build
// RUNNER_FEATURES), so berth must claim exactly what it does: claiming
// less loses jobs (runner_unsupported), claiming more fails them later.
// TestFeaturesAdvertisedAreImplemented holds the list against the code.
type featuresInfo struct {
	Variables               bool `json:"variables"`
	Image                   bool `json:"image"`
	Services                bool `json:"services"`
	Artifacts               bool `json:"artifacts"`
	Cache                   bool `json:"cache"`
	FallbackCacheKeys       bool `json:"fallback_cache_keys"`
	Shared                  bool `json:"shared"`
	UploadMultipleArtifacts bool `json:"upload_multiple_artifacts"`
	UploadRawArtifacts      bool `json:"upload_raw_artifacts"`
	Session                 bool `json:"session"`
	Terminal                bool `json:"terminal"`
	Refspecs                bool `json:"refspecs"`
	Masking                 bool `json:"masking"`
	Proxy                   bool `json:"proxy"`
	RawVariables            bool `json:"raw_variables"`
	ArtifactsExclude        bool `json:"artifacts_exclude"`
	MultiBuildSteps         bool `json:"multi_build_steps"`
	TraceReset              bool `json:"trace_reset"`
	TraceChecksum           bool `json:"trace_checksum"`
	TraceSize               bool `json:"trace_size"`
	VaultSecrets            bool `json:"vault_secrets"`
	Cancelable              bool `json:"cancelable"`
	ReturnExitCode          bool `json:"return_exit_code"`
	ServiceVariables        bool `json:"service_variables"`
	ServiceMultipleAliases  bool `json:"service_multiple_aliases"`
	ImageExecutorOpts       bool `json:"image_executor_opts"`
	ServiceExecutorOpts     bool `json:"service_executor_opts"`
	CancelGracefully        bool `json:"cancel_gracefully"`
}

type versionInfo struct {
	Name         string       `json:"name"`
	Version      string       `json:"version"`
	Revision     string       `json:"revision"`
	Platform     string       `json:"platform"`
	Architecture string       `json:"architecture"`
	Executor     string       `json:"executor"`
	Shell        string       `json:"shell"`
	Features     featuresInfo `json:"features"`
}

type verifyRequest struct {
	Token    string      `json:"token"`
	SystemID string      `json:"system_id"`
	Info     versionInfo `json:"info"`
}

type jobRequest struct {
	Token      string      `json:"token"`
	SystemID   string      `json:"system_id"`
	LastUpdate string      `json:"last_update,omitempty"`
	Info       versionInfo `json:"info"`
}

type jobVariable struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Public bool   `json:"public"`
	File   bool   `json:"file"`
	Masked bool   `json:"masked"`
	Raw    bool   `json:"raw"`
}

type jobStep struct {
	Name         string   `json:"name"`
	Script       []string `json:"script"`
	Timeout      int      `json:"timeout"`
	When         string   `json:"when"`
	AllowFailure bool     `json:"allow_failure"`
}

type jobPayload struct {
	ID    int64  `json:"id"`
	Token string `json:"token"`
	// AllowGitFetch is the project's git strategy: fetch when true, else
	// clone (GIT_STRATEGY overrides it).
	AllowGitFetch bool `json:"allow_git_fetch"`
	JobInfo       struct {
		Name        string `json:"name"`
		Stage       string `json:"stage"`
		ProjectID   int64  `json:"project_id"`
		ProjectName string `json:"project_name"`
	} `json:"job_info"`
	GitInfo struct {
		RepoURL   string   `json:"repo_url"`
		Ref       string   `json:"ref"`
		Sha       string   `json:"sha"`
		BeforeSha string   `json:"before_sha"`
		RefType   string   `json:"ref_type"`
		Refspecs  []string `json:"refspecs"`
		Depth     int      `json:"depth"`
		// RepoObjectFormat is sha1 (or empty) or sha256.
		RepoObjectFormat string `json:"repo_object_format"`
	} `json:"git_info"`
	RunnerInfo struct {
		Timeout int `json:"timeout"`
	} `json:"runner_info"`
	Variables []jobVariable `json:"variables"`
	Steps     []jobStep     `json:"steps"`
	// Hooks are hooks: pre_get_sources_script and post_get_sources_script,
	// which berth does not run (sources.go says so in the log).
	Hooks []struct {
		Name   string   `json:"name"`
		Script []string `json:"script"`
	} `json:"hooks"`
	// Image, Services and Credentials are GitLab's image:, services: and
	// the registry logins it hands the runner (see image.go).
	Image       *jobImage       `json:"image,omitempty"`
	Services    []jobService    `json:"services,omitempty"`
	Credentials []jobCredential `json:"credentials,omitempty"`
	Features    struct {
		FailureReasons []string `json:"failure_reasons"`
		// TokenMaskPrefixes start tokens the log masks (mask.go).
		TokenMaskPrefixes []string `json:"token_mask_prefixes"`
	} `json:"features"`
	// Artifacts, Cache and Dependencies are the job's artifacts:, cache:
	// and the jobs whose artifacts it needs (artifacts.go).
	Artifacts    []jobArtifact   `json:"artifacts"`
	Cache        []jobCache      `json:"cache"`
	Dependencies []jobDependency `json:"dependencies"`
}

type jobOutput struct {
	Checksum string `json:"checksum"`
	Bytesize int    `json:"bytesize"`
}

type updateJobRequest struct {
	Token         string      `json:"token"`
	Info          versionInfo `json:"info"`
	State         string      `json:"state"`
	FailureReason string      `json:"failure_reason,omitempty"`
	ExitCode      *int        `json:"exit_code,omitempty"`
	Output        jobOutput   `json:"output"`
}

// response is an HTTP answer read in full, so callers never leak a body.
type response struct {
	status int
	header http.Header
	body   []byte
}

// client does the HTTP calls; it knows the API's conventions (base path,
// X-Request-Id, User-Agent) but nothing about jobs.
type client struct {
	base    string
	http    *http.Client
	timeout time.Duration
	agent   string
}

// maxResponseBody bounds what is read of an answer; job payloads with many
// variables are the largest and stay far below it.
const maxResponseBody = 32 << 20

func (c *client) do(ctx context.Context, method, path string, header http.Header, contentType string, body []byte) (*response, error) {
	return c.send(ctx, c.timeout, method, path, header, contentType, bytes.NewReader(body), int64(len(body)))
}

// send is do with the body read from r (size bytes, sent as the
// Content-Length) and its own timeout: an artifact upload streams from a
// file and may take far longer than one API call.
func (c *client) send(ctx context.Context, timeout time.Duration, method, path string, header http.Header, contentType string, r io.Reader, size int64) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/api/v4/"+path, r)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.ContentLength = size
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.agent)
	// A unique request ID lets a GitLab admin find each call in GitLab's logs.
	req.Header.Set("X-Request-Id", newRequestID())
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading answer: %w", method, path, err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func (c *client) doJSON(ctx context.Context, method, path string, header http.Header, v any) (*response, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s %s: encoding body: %w", method, path, err)
	}
	return c.do(ctx, method, path, header, "application/json", b)
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b[:])
}

// randomString returns n characters of [0-9a-z], the alphabet of
// gitlab-runner's system IDs.
func randomString(n int) string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func (s *Source) versionInfo() versionInfo {
	return versionInfo{
		Name:         "berth",
		Version:      s.cfg.Version,
		Platform:     runtime.GOOS,
		Architecture: runtime.GOARCH,
		Executor:     "berth",
		Shell:        "bash",
		Features:     advertised(),
	}
}

// updateInterval reads X-GitLab-Trace-Update-Interval (seconds); ok is false
// when the header is absent or not a positive number.
func updateInterval(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("X-GitLab-Trace-Update-Interval"))
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// rangeEnd parses the end of a "Range: 0-SIZE" answer, which is the number of
// bytes GitLab holds (so the offset of the next byte to send).
func rangeEnd(h http.Header) (int, bool) {
	v := strings.TrimSpace(h.Get("Range"))
	_, end, ok := strings.Cut(v, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(end)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// advertised is what berth does of GitLab Runner's features. Not claimed:
// multi_build_steps (release: and other extra steps: berth runs script and
// after_script only), service_variables, image_executor_opts and
// service_executor_opts (per-job image options), vault_secrets, session,
// terminal, proxy, shared.
func advertised() featuresInfo {
	return featuresInfo{
		Variables:    true,
		RawVariables: true, // expandVariables leaves raw ones alone
		Masking:      true,
		Refspecs:     true,
		// image: and services: run in the job's root (package jobroot);
		// several aliases per service, comma or space separated.
		Image:                  true,
		Services:               true,
		ServiceMultipleAliases: true,
		// A service's variables over the job's public ones; docker: user
		// for the job and its services (platform: linux/amd64 only, any
		// other refused) (image.go).
		ServiceVariables:    true,
		ImageExecutorOpts:   true,
		ServiceExecutorOpts: true,
		// Artifacts: archives as zip, reports as gzip or raw, several per
		// job, with exclude; caches with fallback keys (stage.go).
		Artifacts:               true,
		UploadMultipleArtifacts: true,
		UploadRawArtifacts:      true,
		ArtifactsExclude:        true,
		Cache:                   true,
		FallbackCacheKeys:       true,
		TraceReset:              true,
		TraceChecksum:           true,
		TraceSize:               true,
		Cancelable:              true,
		ReturnExitCode:          true,
		CancelGracefully:        true,
	}
}
