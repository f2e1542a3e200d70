package provider

import "errors"

// ErrTransient marks a provider error that may pass by itself: the cloud
// throttled the call, or was briefly unavailable. berth retries such an
// error at start with backoff instead of exiting (issue 19), and /healthz
// says why it waits. It crosses the plugin protocol (see package sdk).
var ErrTransient = errors.New("transient provider error")

// ErrInstanceGoing marks a provider error that says the instance is being
// deleted or replaced by the cloud (AWS: shutting-down, or an Auto Scaling
// group that found it unhealthy; GCP: stopping or terminated). berth then
// treats the instance as going at once, as if a listing had said
// StateDeleting: no job is booked there any more, and a job that had not
// reached it yet moves to another instance (issue 43). It crosses the
// plugin protocol (see package sdk); a plugin that does not use it is
// learnt about at berth's next listing instead.
var ErrInstanceGoing = errors.New("the instance is being deleted by the cloud")
