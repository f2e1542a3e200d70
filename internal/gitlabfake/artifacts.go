package gitlabfake

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
)

// Artifacts, caches and dependencies, as GitLab serves them to a runner
// (lib/api/ci/runner.rb, POST/GET /jobs/:id/artifacts):
//
//   - the job payload carries artifacts[] ({name, untracked, paths, exclude,
//     when, artifact_type, artifact_format, expire_in}), cache[] ({key,
//     untracked, policy, paths, when, fallback_keys}) and dependencies[]
//     ({id, name, token, artifacts_file{filename, size}}: artifacts_file only
//     when the dependency uploaded an archive);
//   - POST /jobs/:id/artifacts?artifact_type=&artifact_format=&expire_in=
//     takes multipart/form-data with the archive in the part "file", with
//     the job's own JOB-TOKEN while the job runs (403 otherwise), 413 beyond
//     Options.MaxArtifactSize, 400 without a file; 201 when stored;
//   - GET /jobs/:id/artifacts answers the archive (artifact_type archive)
//     to the job's own token or to the token of a job that depends on it;
//     404 when there is none.

// EndpointArtifacts is the artifacts endpoints' name in Request.Endpoint.
const EndpointArtifacts = "artifacts"

// Artifact is one artifacts: entry of a job (the archive or a report).
type Artifact struct {
	Name      string
	Untracked bool
	Paths     []string
	Exclude   []string
	When      string // on_success (default), on_failure, always
	Type      string // archive (default), junit, ...
	Format    string // zip (default for archive), gzip, raw
	ExpireIn  string
}

// Cache is one cache: entry of a job.
type Cache struct {
	Key          string
	Untracked    bool
	Policy       string // pull-push (default), pull, push
	Paths        []string
	When         string
	FallbackKeys []string
}

// Step is an extra step of a job beyond script and after_script, e.g. the
// "release" step GitLab sends for release:.
type Step struct {
	Name   string
	Script []string
}

// Uploaded is an artifact a runner uploaded.
type Uploaded struct {
	Type, Format, ExpireIn, Filename string
	// Data is the archive; nil under Options.DigestArtifacts when over 16 MiB.
	Data []byte
	// Size and SHA256 describe the archive as received.
	Size   int64
	SHA256 string
}

// Artifacts returns what the runner uploaded for the job, in order.
func (j *Job) Artifacts() []Uploaded {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return append([]Uploaded(nil), j.uploads...)
}

// FailNextArtifactUploads makes the next n artifact uploads answer status.
func (f *Fake) FailNextArtifactUploads(status, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.artifactFails = append(f.artifactFails, status)
	}
}

func (j *Job) artifactsPayload() []map[string]any {
	out := []map[string]any{}
	for _, a := range j.spec.Artifacts {
		typ, format, when := a.Type, a.Format, a.When
		if typ == "" {
			typ = "archive"
		}
		if format == "" {
			format = "zip"
		}
		if when == "" {
			when = "on_success"
		}
		out = append(out, map[string]any{"name": a.Name, "untracked": a.Untracked, "paths": nonNil(a.Paths),
			"exclude": nonNil(a.Exclude), "when": when, "artifact_type": typ, "artifact_format": format, "expire_in": a.ExpireIn})
	}
	return out
}

func (j *Job) cachePayload() []map[string]any {
	out := []map[string]any{}
	for _, c := range j.spec.Cache {
		policy, when := c.Policy, c.When
		if policy == "" {
			policy = "pull-push"
		}
		if when == "" {
			when = "on_success"
		}
		out = append(out, map[string]any{"key": c.Key, "untracked": c.Untracked, "policy": policy,
			"paths": nonNil(c.Paths), "when": when, "fallback_keys": nonNil(c.FallbackKeys)})
	}
	return out
}

// dependenciesLocked lists the jobs whose artifacts j downloads; f.mu held.
func (j *Job) dependenciesLocked() []map[string]any {
	out := []map[string]any{}
	for _, id := range j.spec.Dependencies {
		d := j.f.jobs[id]
		if d == nil {
			continue
		}
		name := d.spec.Name
		if name == "" {
			name = "job"
		}
		dep := map[string]any{"id": d.id, "name": name, "token": j.token}
		if a := d.archiveLocked(); a != nil {
			dep["artifacts_file"] = map[string]any{"filename": a.Filename, "size": len(a.Data)}
		}
		out = append(out, dep)
	}
	return out
}

func (j *Job) archiveLocked() *Uploaded {
	for i := range j.uploads {
		if j.uploads[i].Type == "archive" {
			return &j.uploads[i]
		}
	}
	return nil
}

func (f *Fake) handleUploadArtifacts(w http.ResponseWriter, r *http.Request) {
	j, id := f.jobFor(r)
	if j == nil {
		f.record(EndpointArtifacts, r, id, http.StatusNotFound, nil)
		http.Error(w, `{"message":"404 Not found"}`, http.StatusNotFound)
		return
	}
	f.mu.Lock()
	running := j.state == StateRunning
	var injected int
	if len(f.artifactFails) > 0 {
		injected, f.artifactFails = f.artifactFails[0], f.artifactFails[1:]
	}
	f.mu.Unlock()
	status, up := f.readUpload(r, j, running, injected)
	f.record(EndpointArtifacts, r, id, status, nil)
	if status != http.StatusCreated {
		http.Error(w, `{"message":"`+http.StatusText(status)+`"}`, status)
		return
	}
	f.mu.Lock()
	j.uploads = append(j.uploads, up)
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{})
}

// readUpload checks and reads one upload; it returns the status to answer.
func (f *Fake) readUpload(r *http.Request, j *Job, running bool, injected int) (int, Uploaded) {
	if r.Header.Get("JOB-TOKEN") != j.token || !running {
		return http.StatusForbidden, Uploaded{}
	}
	if injected != 0 {
		return injected, Uploaded{}
	}
	q := r.URL.Query()
	up := Uploaded{Type: q.Get("artifact_type"), Format: q.Get("artifact_format"), ExpireIn: q.Get("expire_in")}
	if up.Type == "" {
		up.Type = "archive"
	}
	if up.Format == "" {
		up.Format = "zip"
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return http.StatusBadRequest, up
	}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return http.StatusBadRequest, up // no "file" part
		}
		if err != nil {
			return http.StatusBadRequest, up
		}
		if p.FormName() != "file" {
			continue
		}
		return f.readFilePart(p, up)
	}
}

func (f *Fake) readFilePart(p *multipart.Part, up Uploaded) (int, Uploaded) {
	up.Filename = p.FileName()
	limit := f.opts.MaxArtifactSize
	if limit <= 0 {
		limit = 100 << 20 // GitLab's default maximum artifacts size
	}
	h := sha256.New()
	keep := &capped{max: -1}
	if f.opts.DigestArtifacts {
		keep.max = digestKeeps
	}
	n, err := io.Copy(io.MultiWriter(h, keep), io.LimitReader(p, limit+1))
	if err != nil {
		return http.StatusBadRequest, up
	}
	if n > limit {
		return http.StatusRequestEntityTooLarge, up
	}
	if !keep.over {
		up.Data = keep.b.Bytes()
	}
	up.Size, up.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	return http.StatusCreated, up
}

func (f *Fake) handleDownloadArtifacts(w http.ResponseWriter, r *http.Request) {
	j, id := f.jobFor(r)
	if j == nil {
		f.record(EndpointArtifacts, r, id, http.StatusNotFound, nil)
		http.Error(w, `{"message":"404 Not found"}`, http.StatusNotFound)
		return
	}
	tok := r.Header.Get("JOB-TOKEN")
	f.mu.Lock()
	allowed := tok == j.token
	for _, other := range f.jobs {
		if other.token == tok && strings.Contains(","+joinIDs(other.spec.Dependencies)+",", ","+strconv.FormatInt(id, 10)+",") {
			allowed = true
		}
	}
	a := j.archiveLocked()
	var data []byte
	if a != nil {
		data = a.Data
	}
	f.mu.Unlock()
	switch {
	case !allowed:
		f.record(EndpointArtifacts, r, id, http.StatusForbidden, nil)
		http.Error(w, `{"message":"403 Forbidden"}`, http.StatusForbidden)
	case a == nil:
		f.record(EndpointArtifacts, r, id, http.StatusNotFound, nil)
		http.Error(w, `{"message":"404 Not found"}`, http.StatusNotFound)
	default:
		f.record(EndpointArtifacts, r, id, http.StatusOK, nil)
		w.Header().Set("Content-Type", "application/zip")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data)
	}
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

// digestKeeps is the largest upload DigestArtifacts still keeps whole (a
// zipped archive of zeros, say), so that a dependent job can download it.
const digestKeeps = 16 << 20

// capped keeps what is written up to max bytes (negative: no bound); past
// it, it keeps nothing and says so.
type capped struct {
	b    bytes.Buffer
	max  int64
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.over || c.max >= 0 && int64(c.b.Len()+len(p)) > c.max {
		c.over = true
		c.b = bytes.Buffer{}
		return len(p), nil
	}
	return c.b.Write(p)
}
