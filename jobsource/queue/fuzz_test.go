package queue_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-ci/berth/jobsource/queue"
)

func FuzzDecodeJobRequest(f *testing.F) {
	for _, seed := range []string{
		`{"script": "make test"}`,
		`{"script": "x", "env": {"A": "1", "_b2": ""}, "timeout": "1h30m", "suspend": true, "resume": "k-1"}`,
		`{"script": "x", "timeout": "-1s"}`,
		`{"script": "x", "timeout": "9223372036854775807ns"}`,
		`{"script": "", "after_script": "y"}`,
		`{"script": "x"} trailing`,
		`{"script": "a\u0000b"}`,
		`{"env": {"1": "x"}, "script": "y"}`,
		`null`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, spec, err := queue.DecodeJobRequest(bytes.NewReader(data))
		if err != nil {
			var re *queue.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is %T, want *RequestError", err, err)
			}
			if re.Status != http.StatusBadRequest && re.Status != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d for %q", re.Status, data)
			}
			if re.Message == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if strings.TrimSpace(spec.Script) == "" || strings.ContainsRune(spec.Script, 0) {
			t.Fatalf("accepted script %q", spec.Script)
		}
		if spec.Timeout < 0 || spec.Timeout > queue.MaxTimeout {
			t.Fatalf("accepted timeout %v", spec.Timeout)
		}
		if len(spec.Env) != len(req.Env) {
			t.Fatalf("env %v from %v", spec.Env, req.Env)
		}
		for _, kv := range spec.Env {
			name, _, _ := strings.Cut(kv, "=")
			if name == "" || (name[0] >= '0' && name[0] <= '9') || strings.ContainsAny(name, " -.$\x00") {
				t.Fatalf("accepted env name %q", name)
			}
		}
		// What was accepted survives a round trip unchanged.
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		req2, spec2, err := queue.DecodeJobRequest(bytes.NewReader(again))
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if spec2.Script != spec.Script || spec2.Timeout != spec.Timeout || strings.Join(spec2.Env, "\n") != strings.Join(spec.Env, "\n") ||
			spec2.Suspend != spec.Suspend || spec2.ResumeKey != spec.ResumeKey || req2.AfterScript != req.AfterScript {
			t.Fatalf("round trip changed %+v into %+v", spec, spec2)
		}
	})
}
