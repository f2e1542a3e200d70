package provider

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
)

// ErrTransient marks a provider error that may pass by itself: the cloud
// throttled the call, was briefly unavailable, or could not be reached.
// berth retries such an error at start with backoff instead of exiting
// (issue 19, issue 44), and /healthz says why it waits. It crosses the
// plugin protocol (see package sdk).
var ErrTransient = errors.New("transient provider error")

// Unreachable reports whether err is a failure to reach the cloud's API
// at all: a refused or reset connection, a timeout, a connection cut in
// the middle of an answer, or a name lookup that failed for a reason
// other than the name not existing. Such an error says nothing about
// the configuration and may pass (the API, a proxy or the network
// comes back), so plugins wrap it with ErrTransient. A name that does
// not exist, or a TLS certificate refused, is not unreachable: those
// are settings to fix.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var op *net.OpError
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.As(err, &dns):
		return !dns.IsNotFound
	case errors.As(err, &cert):
		return false
	case errors.As(err, &op):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.As(err, &ue) && errors.Is(ue.Err, io.EOF):
		// The server closed the connection before answering.
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF)
}

// ErrInstanceGoing marks a provider error that says the instance is being
// deleted or replaced by the cloud (AWS: shutting-down, or an Auto Scaling
// group that found it unhealthy; GCP: stopping or terminated). berth then
// treats the instance as going at once, as if a listing had said
// StateDeleting: no job is booked there any more, and a job that had not
// reached it yet moves to another instance (issue 43). It crosses the
// plugin protocol (see package sdk); a plugin that does not use it is
// learnt about at berth's next listing instead.
var ErrInstanceGoing = errors.New("the instance is being deleted by the cloud")
