package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// What a plugin meets when its cloud's API is down is unreachable, and
// so retried at start; an endpoint that answers, or a name that does not
// exist, is not.
func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	_, errRefused := http.Get(refused)

	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer slow.Close()
	defer close(hang)
	_, errTimeout := (&http.Client{Timeout: 50 * time.Millisecond}).Get(slow.URL)

	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
	}))
	defer cut.Close()
	_, errCut := http.Get(cut.URL)

	// As the dialer reports a name that does not resolve (built here:
	// a lookup would leave loopback).
	errNoHost := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "compute.example", IsNotFound: true}}
	errDNSDown := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "server misbehaving", Name: "compute.example", IsTemporary: true}}

	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", errRefused, true},
		{"wrapped by a plugin", fmt.Errorf("gcp: instanceGroupManagers.get: %w", errRefused), true},
		{"client timeout", errTimeout, true},
		{"connection closed before the answer", errCut, true},
		{"context deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), true},
		{"no such host", errNoHost, false},
		{"name server down", errDNSDown, true},
		{"an API's refusal", errors.New("403 forbidden"), false},
		{"nil", nil, false},
	} {
		if c.err == nil && c.want {
			t.Errorf("%s: no error to classify", c.name)
			continue
		}
		if got := Unreachable(c.err); got != c.want {
			t.Errorf("%s: Unreachable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
