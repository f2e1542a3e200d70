package images

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Kind says why an image could not be made ready; callers map it onto a
// job failure reason (see FailureReason).
type Kind string

// The kinds of PullError.
const (
	KindInvalid      Kind = "invalid reference"
	KindDisallowed   Kind = "not allowed"
	KindNotFound     Kind = "not found"
	KindUnauthorized Kind = "unauthorized"
	KindUnreachable  Kind = "registry unreachable"
	KindInsecure     Kind = "plain HTTP registry not allowed"
	KindNoPlatform   Kind = "no linux/amd64 image"
	KindCorrupt      Kind = "corrupt layer"
	KindTooLarge     Kind = "image too large"
	KindNotCached    Kind = "not cached"
	KindDiskFull     Kind = "disk full"
	KindSystem       Kind = "system error"
)

// PullError reports an image that could not be made ready. Its message
// names the image and the cause, and says what to do where that is clear.
type PullError struct {
	// Image is the reference as the job wrote it.
	Image string
	// Kind classifies the cause.
	Kind Kind
	// Err is the underlying error.
	Err error
}

// Error reads `image "REF": KIND: CAUSE`.
func (e *PullError) Error() string {
	return fmt.Sprintf("image %q: %s: %v%s", e.Image, e.Kind, e.Err, hint(e.Kind))
}

// Unwrap returns the cause.
func (e *PullError) Unwrap() error { return e.Err }

// FailureReason is the GitLab failure reason for the error: a problem with
// the image itself or its registry is image_pull_failure, a problem of the
// instance (its disk, its kernel) is runner_system_failure.
func (e *PullError) FailureReason() string {
	switch e.Kind {
	case KindDiskFull, KindSystem:
		return "runner_system_failure"
	}
	return "image_pull_failure"
}

func hint(k Kind) string {
	switch k {
	case KindDisallowed:
		return " (add a matching glob to [images] allowed_images, or use an allowed image)"
	case KindUnauthorized:
		return " (give the job registry credentials, or log in with ~/.docker/config.json on the instance)"
	case KindInsecure:
		return " (list the registry's host:port in [images] insecure_registries to allow plain HTTP)"
	case KindNotCached:
		return " (pull_policy is never: pull the image on the instance first, or set pull_policy = \"if-not-present\")"
	case KindDiskFull:
		return " (free disk space on the instance, or lower [images] cache_size or disk_reserve)"
	case KindTooLarge:
		return " (use a smaller image, or raise the [images] limit named above)"
	}
	return ""
}

// classify turns a registry or file system error into a PullError.
func classify(image string, err error) *PullError {
	var pe *PullError
	if errors.As(err, &pe) {
		return pe
	}
	kind := KindSystem
	var te *transport.Error
	var oe *net.OpError
	var de *net.DNSError
	var ue *url.Error
	switch {
	case errors.Is(err, errPrivate):
		kind = KindUnreachable
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		kind = KindDiskFull
	case errors.Is(err, errInsecure):
		kind = KindInsecure
	case errors.As(err, &te):
		kind = transportKind(te)
	case errors.As(err, &oe), errors.As(err, &de), errors.As(err, &ue):
		// Not net.Error: a file system errno satisfies that interface too.
		kind = KindUnreachable
	}
	return &PullError{Image: image, Kind: kind, Err: err}
}

// classify is the package's classify, with the cause of a registry that
// did not answer put in one message under RefusePrivate: how a connection
// failed (refused, reset, a TLS or HTTP answer) would tell a job without
// network what listens on the host's networks. The cause goes to the log.
func (c *Cache) classify(image string, err error) *PullError {
	pe := classify(image, err)
	if !c.cfg.RefusePrivate || (pe.Kind != KindUnreachable && pe.Kind != KindInsecure) {
		return pe
	}
	reg := image
	if ref, perr := ParseRef(image); perr == nil {
		reg = ref.Context().RegistryStr()
	}
	if slices.Contains(c.cfg.Private, reg) || slices.Contains(c.cfg.Insecure, reg) {
		return pe // a registry the operator listed: its cause helps, and tells no secret
	}
	c.log.Warn("image pull: registry did not answer", "image", image, "registry", reg, "err", err)
	return &PullError{Image: image, Kind: KindUnreachable, Err: &unreachableError{registry: reg}}
}

// unreachableError is the one message a job gets for a registry berth's
// host did not reach.
type unreachableError struct{ registry string }

func (e *unreachableError) Error() string {
	return fmt.Sprintf("no registry answered at %s from berth's host (registries at loopback, link-local or private addresses "+
		"must be listed in [images] private_registries; the berth log has the cause)", e.registry)
}

func transportKind(te *transport.Error) Kind {
	switch te.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return KindUnauthorized
	case http.StatusNotFound:
		return KindNotFound
	}
	for _, d := range te.Errors {
		switch d.Code {
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			return KindUnauthorized
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
			return KindNotFound
		}
	}
	return KindUnreachable
}
