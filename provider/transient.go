package provider

import "errors"

// ErrTransient marks a provider error that may pass by itself: the cloud
// throttled the call, or was briefly unavailable. berth retries such an
// error at start with backoff instead of exiting (issue 19), and /healthz
// says why it waits. It crosses the plugin protocol (see package sdk).
var ErrTransient = errors.New("transient provider error")
