package gitlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/berth-ci/berth/internal/bytesize"
)

// The artifacts API, as gitlab-runner's artifacts-uploader and -downloader
// use it (common/network.go, network/gitlab.go in gitlab-org/gitlab-runner):
//
//	POST /jobs/:id/artifacts?artifact_format=F&artifact_type=T[&expire_in=E]
//	     JOB-TOKEN: <the job's token>, multipart/form-data with the archive
//	     in the part "file" → 201; 413 too large; 403 job not running or
//	     token refused.
//	GET  /jobs/:id/artifacts  JOB-TOKEN: <the dependency's token> → 200 zip;
//	     404 none (expired or never made); 403 refused.

// jobArtifact is one entry of the payload's artifacts: the archive
// (artifacts:paths) or a report (artifacts:reports:*).
type jobArtifact struct {
	Name      string   `json:"name"`
	Untracked bool     `json:"untracked"`
	Paths     []string `json:"paths"`
	Exclude   []string `json:"exclude"`
	When      string   `json:"when"`
	Type      string   `json:"artifact_type"`
	Format    string   `json:"artifact_format"`
	ExpireIn  string   `json:"expire_in"`
}

// jobCache is one entry of the payload's cache.
type jobCache struct {
	Key          string   `json:"key"`
	Untracked    bool     `json:"untracked"`
	Policy       string   `json:"policy"`
	Paths        []string `json:"paths"`
	When         string   `json:"when"`
	FallbackKeys []string `json:"fallback_keys"`
}

// jobDependency is a job whose artifacts this job downloads.
type jobDependency struct {
	ID            int64  `json:"id"`
	Token         string `json:"token"`
	Name          string `json:"name"`
	ArtifactsFile struct {
		Filename string `json:"filename"`
		Size     int64  `json:"size"`
	} `json:"artifacts_file"`
}

// artifactAttempts is how often an upload or download is tried, as
// gitlab-runner's default (one try and two retries).
const artifactAttempts = 3

// artifactTimeout bounds one upload or download: an archive of gigabytes
// takes far longer than an API call.
const artifactTimeout = time.Hour

// errNoRetry marks an artifact error that retrying cannot fix.
var errNoRetry = errors.New("not retried")

// errArtifactTooLarge marks an archive refused for its size, by berth's
// max_artifact_size or by GitLab (413). The job made more than it may
// keep: running it again makes the same archive, so the job fails as
// script_failure, as in GitLab Runner (ErrTooLarge), not as a runner
// failure that retry: when: runner_system_failure would repeat.
var errArtifactTooLarge = errors.New("artifact too large")

// uploadArtifact sends one archive (size bytes of archive), retrying
// network errors and 5xx with doubling pauses. 413 (too large) and 403
// (refused) are not retried: GitLab Runner gives up on them at once too.
func (j *Job) uploadArtifact(ctx context.Context, a jobArtifact, filename string, archive io.ReaderAt, size int64) error {
	q := url.Values{}
	q.Set("artifact_format", a.Format)
	q.Set("artifact_type", a.Type)
	if a.ExpireIn != "" {
		q.Set("expire_in", a.ExpireIn)
	}
	var err error
	delay := j.src.cfg.ArtifactRetryDelay
	for attempt := 1; attempt <= artifactAttempts; attempt++ {
		if attempt > 1 {
			j.writeLine(fmt.Sprintf("WARNING: Uploading artifacts as %q to coordinator... failed: %v; retrying in %s (try %d of %d)", a.Type, err, delay, attempt, artifactAttempts))
			if serr := sleep(ctx, delay); serr != nil {
				return serr
			}
			delay *= 2
		}
		err = j.postArtifact(ctx, q, filename, io.NewSectionReader(archive, 0, size), size)
		if err == nil || errors.Is(err, errNoRetry) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// postArtifact sends the archive as the multipart part "file", streamed
// from the archive's file: only the part's header and the closing
// boundary are held in memory, so the body's length is known up front.
func (j *Job) postArtifact(ctx context.Context, q url.Values, filename string, archive io.Reader, size int64) error {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", filename); err != nil {
		return err
	}
	prefix := bytes.Clone(head.Bytes())
	head.Reset()
	if err := mw.Close(); err != nil {
		return err
	}
	body := io.MultiReader(bytes.NewReader(prefix), archive, &head)
	length := int64(len(prefix)) + size + int64(head.Len())
	resp, err := j.src.client.send(ctx, artifactTimeout, http.MethodPost, j.path+"/artifacts?"+q.Encode(), j.header, mw.FormDataContentType(), body, length)
	if err != nil {
		return err
	}
	switch resp.status {
	case http.StatusCreated, http.StatusOK:
		return nil
	case http.StatusRequestEntityTooLarge:
		return fmt.Errorf("%w: %w: 413 Request Entity Too Large: the archive (%s) is larger than GitLab's maximum artifacts size for this project%s; "+
			"keep fewer or smaller paths in artifacts:, or ask a GitLab admin to raise the limit (Admin > Settings > CI/CD > Maximum artifacts size, "+
			"or the project's or group's setting)", errNoRetry, errArtifactTooLarge, bytesize.Format(size), gitlabMessage(resp.body))
	case http.StatusForbidden, http.StatusUnauthorized:
		return fmt.Errorf("%w: %d Forbidden: GitLab refused the job token (the job is no longer running, or was canceled): %s", errNoRetry, resp.status, truncate(resp.body, 200))
	default:
		return fmt.Errorf("status %d: %s", resp.status, truncate(resp.body, 200))
	}
}

// gitlabMessage is GitLab's {"message": ...} of an error answer, as
// " (GitLab: ...)", or "" when there is none beyond the status line.
func gitlabMessage(body []byte) string {
	var m struct {
		Message any `json:"message"`
	}
	if json.Unmarshal(body, &m) != nil || m.Message == nil {
		return ""
	}
	s := strings.TrimSpace(fmt.Sprint(m.Message))
	if s == "" || strings.HasPrefix(s, "413") || s == http.StatusText(http.StatusRequestEntityTooLarge) {
		return ""
	}
	return " (GitLab: " + truncate([]byte(s), 200) + ")"
}

// downloadArtifacts fetches dep's archive into a temp file, retrying network
// errors and 5xx; the caller removes the file.
func (j *Job) downloadArtifacts(ctx context.Context, dep jobDependency) (*os.File, int64, error) {
	var err error
	delay := j.src.cfg.ArtifactRetryDelay
	for attempt := 1; attempt <= artifactAttempts; attempt++ {
		if attempt > 1 {
			j.writeLine(fmt.Sprintf("WARNING: Downloading artifacts from coordinator... failed: %v; retrying in %s (try %d of %d)", err, delay, attempt, artifactAttempts))
			if serr := sleep(ctx, delay); serr != nil {
				return nil, 0, serr
			}
			delay *= 2
		}
		var f *os.File
		var n int64
		f, n, err = j.getArtifacts(ctx, dep)
		if err == nil {
			return f, n, nil
		}
		if errors.Is(err, errNoRetry) || ctx.Err() != nil {
			break
		}
	}
	return nil, 0, err
}

func (j *Job) getArtifacts(ctx context.Context, dep jobDependency) (*os.File, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, artifactTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.src.cfg.URL+"/api/v4/jobs/"+strconv.FormatInt(dep.ID, 10)+"/artifacts", nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("JOB-TOKEN", dep.Token)
	req.Header.Set("User-Agent", j.src.client.agent)
	req.Header.Set("X-Request-Id", newRequestID())
	resp, err := j.src.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, 0, fmt.Errorf("%w: 404 Not Found: job %d (%s) has no artifacts (they expired, or the job made none)", errNoRetry, dep.ID, dep.Name)
	case http.StatusForbidden, http.StatusUnauthorized:
		return nil, 0, fmt.Errorf("%w: %d Forbidden: GitLab refused the token for the artifacts of job %d (%s)", errNoRetry, resp.StatusCode, dep.ID, dep.Name)
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	f, err := os.CreateTemp(j.src.cfg.TempDir, "berth-artifacts-*.zip")
	if err != nil {
		return nil, 0, err
	}
	os.Remove(f.Name()) // unlinked: gone when closed, whatever happens
	n, err := io.Copy(f, resp.Body)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, n, nil
}
