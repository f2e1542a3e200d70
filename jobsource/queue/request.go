package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/jobsource"
)

// MaxTimeout is the longest timeout a job may ask for. Longer values are
// almost always a unit mistake ("10000h"), and a job that really runs for a
// week should not hold an instance unsupervised.
const MaxTimeout = 7 * 24 * time.Hour

// maxResumeKey bounds an environment key; real keys are short IDs.
const maxResumeKey = 256

// RequestError is a job request the queue refuses. Status is the HTTP status
// to answer with (400 or 413) and Message says what to change.
type RequestError struct {
	// Status is http.StatusBadRequest or http.StatusRequestEntityTooLarge.
	Status int
	// Message says what is wrong and how to fix it.
	Message string
}

// Error returns Message.
func (e *RequestError) Error() string { return e.Message }

func badRequest(format string, args ...any) *RequestError {
	return &RequestError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

const knownFields = "script, after_script, env, timeout, suspend, resume"

// DecodeJobRequest reads one JSON job request from r, rejecting unknown
// fields (a typo such as "scirpt" must not silently run nothing) and trailing
// data, then validates it. The returned Spec is what the job will run.
func DecodeJobRequest(r io.Reader) (api.JobRequest, jobsource.Spec, error) {
	var req api.JobRequest
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return api.JobRequest{}, jobsource.Spec{}, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return api.JobRequest{}, jobsource.Spec{}, decodeError(err)
		}
		return api.JobRequest{}, jobsource.Spec{}, badRequest("the body has more data after the job's JSON object: send exactly one object per request")
	}
	spec, err := Validate(req)
	if err != nil {
		return api.JobRequest{}, jobsource.Spec{}, err
	}
	return req, spec, nil
}

func decodeError(err error) *RequestError {
	var mbe *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return &RequestError{Status: http.StatusRequestEntityTooLarge,
			Message: fmt.Sprintf("the request body is larger than %d bytes: put big scripts in the repository and run them from a short script", mbe.Limit)}
	case errors.Is(err, io.EOF):
		return badRequest(`the body is empty: send a JSON object such as {"script": "make test"}`)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("the body ends in the middle of the JSON object: send the complete object")
	case errors.As(err, &syn):
		return badRequest("the body is not valid JSON (at byte %d): %v", syn.Offset, err)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest(`the body must be a JSON object such as {"script": "make test"}, not a %s`, typ.Value)
		}
		return badRequest("field %q must be %s, not a %s", typ.Field, describeType(typ.Field), typ.Value)
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return badRequest("unknown field %s in the job request: known fields are %s", field, knownFields)
	}
	return badRequest("cannot decode the job request: %v", err)
}

func describeType(field string) string {
	switch {
	case field == "env" || strings.HasPrefix(field, "env."):
		return `an object of string values, e.g. {"GOFLAGS": "-race"}`
	case field == "suspend":
		return "true or false"
	default:
		return "a string"
	}
}

// Validate checks a decoded request and turns it into the Spec the job runs.
func Validate(req api.JobRequest) (jobsource.Spec, error) {
	if strings.TrimSpace(req.Script) == "" {
		return jobsource.Spec{}, badRequest(`"script" is empty: give the commands to run, e.g. {"script": "make test"}`)
	}
	if strings.IndexByte(req.Script, 0) >= 0 || strings.IndexByte(req.AfterScript, 0) >= 0 {
		return jobsource.Spec{}, badRequest("the script contains a NUL byte, which a shell cannot run: send text")
	}
	names := make([]string, 0, len(req.Env))
	for k, v := range req.Env {
		if !executor.ValidEnvName(k) {
			return jobsource.Spec{}, badRequest("env name %q is not a shell identifier: use letters, digits and _, not starting with a digit", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return jobsource.Spec{}, badRequest("env %s contains a NUL byte, which a shell cannot hold", k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	env := make([]string, 0, len(names))
	for _, k := range names {
		env = append(env, k+"="+req.Env[k])
	}
	timeout, err := parseTimeout(req.Timeout)
	if err != nil {
		return jobsource.Spec{}, err
	}
	if req.Resume != "" {
		if len(req.Resume) > maxResumeKey {
			return jobsource.Spec{}, badRequest("resume key is %d bytes long, more than %d: pass the key `berth jobs ID` shows for the suspended job", len(req.Resume), maxResumeKey)
		}
		for _, c := range req.Resume {
			if unicode.IsSpace(c) || !unicode.IsPrint(c) {
				return jobsource.Spec{}, badRequest("resume key %q contains spaces or control characters: pass the key exactly as `berth jobs ID` shows it", req.Resume)
			}
		}
	}
	var spec jobsource.Spec
	spec.Script = req.Script
	spec.AfterScript = req.AfterScript
	if len(env) > 0 {
		spec.Env = env
	}
	spec.Timeout = timeout
	spec.Suspend = req.Suspend
	spec.ResumeKey = req.Resume
	if err := validImages(req.Image, req.Services); err != nil {
		return jobsource.Spec{}, err
	}
	spec.Image, spec.Services = specImage(req.Image, req.Services)
	return spec, nil
}

func parseTimeout(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, badRequest("timeout %q is not a duration: use a Go duration such as 90s, 10m or 2h", s)
	}
	if d <= 0 {
		return 0, badRequest("timeout %q must be positive: leave it out to use the server's default", s)
	}
	if d > MaxTimeout {
		return 0, badRequest("timeout %q is longer than the maximum of %s: split the job or use a shorter timeout", s, MaxTimeout)
	}
	return d, nil
}
