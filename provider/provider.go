// Package provider defines the instance-group interface that every berth
// provider implements, the instance states it reports, and a registry of
// built-in providers.
//
// The shape follows the instance-group plugins users of GitLab's fleeting
// know: Increase asks for more instances without naming them, and new
// instances become known only when Update lists them. The scaler accounts for
// that gap itself, so a provider may list new instances late.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// State is an instance's state as the provider reports it.
type State string

// Instance states reported by Update.
const (
	StateCreating   State = "creating"
	StateRunning    State = "running"
	StateSuspending State = "suspending"
	StateSuspended  State = "suspended"
	StateResuming   State = "resuming"
	StateDeleting   State = "deleting"
	StateDeleted    State = "deleted"
	StateTimeout    State = "timeout"
)

// Valid reports whether s is one of the documented states.
func (s State) Valid() bool {
	switch s {
	case StateCreating, StateRunning, StateSuspending, StateSuspended,
		StateResuming, StateDeleting, StateDeleted, StateTimeout:
		return true
	}
	return false
}

// Capabilities lists optional features of a provider.
type Capabilities struct {
	// Suspend is true when the provider implements Suspender.
	Suspend bool `json:"suspend"`
	// Notify is true when the provider implements Notifier: it reports at
	// least every instance that becomes running, so berth need not wait for
	// its next listing to learn that.
	Notify bool `json:"notify"`
	// Recycle is true when the provider implements Recycler. The manager
	// resets instances between jobs only when it is set, so a type that
	// implements Recycler for a backend that may not support it (an
	// external plugin) says here whether it does.
	Recycle bool `json:"recycle"`
	// Disposable is true when the group's instances are interchangeable:
	// berth may delete one and ask for another at will, and loses nothing
	// but the boot time (a cloud's virtual machines). A running instance
	// berth finds with no record of what ran there is then deleted and
	// replaced when berth cannot reset it, instead of being handed a job
	// next to what an unknown job left behind (docs/semantics.md,
	// "Restart"). A provider whose instances are few and kept (a static
	// list of hosts) leaves it false.
	Disposable bool `json:"disposable"`
	// RequestedSize is true when the provider implements RequestedSizer
	// and can answer it. As with Recycle, a type that implements the
	// interface for a backend that may not keep such a number (an external
	// plugin) says here whether it does.
	RequestedSize bool `json:"requested_size"`
}

// Info describes an initialised instance group.
type Info struct {
	// ID names the group uniquely, e.g. "local/berth-3f2a".
	ID string `json:"id"`
	// MaxSize is the most instances the group can hold; 0 means no limit.
	MaxSize int `json:"max_size"`
	// Version is the provider's version string.
	Version string `json:"version"`
	// Capabilities lists optional features.
	Capabilities Capabilities `json:"capabilities"`
}

// Settings is what Init receives.
type Settings struct {
	// Config is the provider's own configuration ([autoscaler.provider_config]) as JSON.
	Config json.RawMessage `json:"config,omitempty"`
	// StateDir is a directory the provider may use for its own files.
	StateDir string `json:"state_dir"`
	// Private lists host paths that instances must never see: berth's
	// state directory, its config file, token files and other paths the
	// config names. A provider that shows host files to instances refuses
	// to start when one of these would be visible.
	Private []string `json:"private,omitempty"`
	// Capacity is capacity_per_instance: how many jobs may run on one
	// instance at once, for providers that size per-instance limits by it;
	// 0 when unknown (the plugin protocol does not carry it yet).
	Capacity int `json:"capacity,omitempty"`
}

// ConnectInfo tells an executor how to reach an instance over SSH.
type ConnectInfo struct {
	// ID is the instance ID.
	ID string `json:"id"`
	// Addr is host:port of the instance's SSH server.
	Addr string `json:"addr"`
	// Username to log in as.
	Username string `json:"username"`
	// HostKey is the instance's SSH host public key in authorized_keys format;
	// executors must refuse a server presenting any other key.
	HostKey string `json:"host_key"`
	// PrivateKey is the group's client key, PEM encoded.
	PrivateKey []byte `json:"private_key"`
	// OS and Arch of the instance, e.g. "linux", "amd64".
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// Local, when set, runs commands on the instance without SSH: the
	// provider runs the instance in this very process and holds a socket
	// to its init process (the local provider, for sandboxes it started
	// itself). It never crosses the plugin protocol: plugins, remote
	// instances and sandboxes adopted after a berth restart leave it nil,
	// and the executor uses SSH.
	Local LocalExec `json:"-"`
}

// LocalExec hands commands to an instance's init process over a socket the
// provider holds (see package internal/localexec for the protocol).
type LocalExec interface {
	// SendExec passes one exec request and its descriptors to the
	// instance's init process; the descriptors stay the caller's. It
	// returns ErrLocalExecUnavailable when the provider holds no socket to
	// the instance any more, and the executor then uses SSH.
	SendExec(msg []byte, fds []int) error
}

// ErrLocalExecUnavailable: the instance can no longer be reached through
// ConnectInfo.Local; use SSH.
var ErrLocalExecUnavailable = errors.New("no local exec socket to the instance")

// InstanceGroup is the interface every provider implements. Calls may be slow
// and may fail; the scaler never calls them while holding its state.
type InstanceGroup interface {
	// Init prepares the group and reports what it is.
	Init(ctx context.Context, s Settings) (Info, error)
	// Update calls fn for every instance the group holds now.
	Update(ctx context.Context, fn func(id string, s State)) error
	// Increase asks for n more instances and returns how many were requested
	// successfully; they appear in a later Update.
	Increase(ctx context.Context, n int) (int, error)
	// Decrease deletes the given instances and returns the IDs it accepted.
	Decrease(ctx context.Context, ids []string) ([]string, error)
	// ConnectInfo returns how to reach the instance.
	ConnectInfo(ctx context.Context, id string) (ConnectInfo, error)
	// Heartbeat checks that the instance is alive and reachable.
	Heartbeat(ctx context.Context, id string) error
	// Shutdown releases the group's resources; instances keep running.
	Shutdown(ctx context.Context) error
}

// Suspender is the optional suspend/resume capability. Suspended instances
// keep their disk; resumed ones continue where they stopped.
type Suspender interface {
	// Suspend suspends the given instances and returns the IDs it accepted.
	Suspend(ctx context.Context, ids []string) ([]string, error)
	// Resume resumes the given instances and returns the IDs it accepted.
	Resume(ctx context.Context, ids []string) ([]string, error)
}

// Notifier is the optional capability of a provider that learns by itself
// when an instance changes state, so that berth hears of it at once rather
// than at its next periodic Update. A cold job waits for its instance to
// become running; a provider that knows that moment within milliseconds
// (the local provider does) saves the job up to a whole listing interval.
//
// A notification is a hint, never the truth: Update stays the only source
// of instance state. On a notification berth lists the group again, and it
// keeps listing periodically, so a lost notification costs latency, not
// correctness. A provider that implements Notifier sets
// Capabilities.Notify.
type Notifier interface {
	// Notify registers fn, replacing any function registered before; nil
	// stops the notifications, and once Notify returns the function it
	// replaced is not called any more. The provider calls fn(id, s) when instance
	// id has changed to state s, and only once an Update would list it so.
	// It must report every instance that becomes StateRunning (after
	// creating or resuming); other changes are optional. fn may be called
	// from any goroutine, more than once for one change, and for a change
	// that a later Update no longer shows; it returns quickly and does not
	// call the provider.
	Notify(fn func(id string, s State))
}

// RequestedSizer is the optional capability of a provider whose group keeps
// the number of instances it was asked for: a GCP managed instance group's
// target size, an AWS Auto Scaling group's desired capacity, an Azure scale
// set's capacity. After a restart or a failover berth reads it once, right
// after its first listing, to tell the increases it had pending that
// reached the provider from those lost with the previous process, which
// would otherwise count toward max_instances until
// instance_acquire_timeout (issue 43).
//
// A provider that implements RequestedSizer sets Capabilities.RequestedSize.
type RequestedSizer interface {
	// RequestedSize returns how many instances the group was asked for
	// in all, the ones being deleted left out. An error that wraps
	// ErrRequestedSizeUnknown says the provider cannot tell (a plugin that
	// predates the call, a wrapper around a provider without it): berth
	// asks no more and writes the restored increases off by its listings.
	// Any other error is taken as transient and the call made again after
	// the next listing.
	RequestedSize(ctx context.Context) (int, error)
}

// ErrRequestedSizeUnknown is wrapped by RequestedSize when the provider
// keeps no requested size, so that berth stops asking for it.
var ErrRequestedSizeUnknown = errors.New("the provider does not say how many instances its group was asked for")

// Recycler is the optional capability of providers that can reset an
// instance between two jobs, so that nothing one job left behind (processes,
// temporary files, its home directory, the hostname) is seen by the next.
// The manager calls Recycle when a job released its slot on an instance that
// holds one slot, and never on a parked environment. A provider that
// implements Recycler sets Capabilities.Recycle.
type Recycler interface {
	// Recycle resets the instance; it returns once the reset is complete.
	Recycle(ctx context.Context, id string) error
}

// ErrUnknownProvider is returned by New for a name nobody registered.
var ErrUnknownProvider = errors.New("unknown provider")

var (
	regMu    sync.Mutex
	registry = map[string]func() InstanceGroup{}
)

// Register makes a built-in provider available under name. It panics on a
// duplicate name, which is a programming error.
func Register(name string, factory func() InstanceGroup) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("provider: Register called twice for " + name)
	}
	registry[name] = factory
}

// Names lists the registered providers, sorted.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New returns a new, uninitialised instance of the named built-in provider.
func New(name string) (InstanceGroup, error) {
	regMu.Lock()
	f, ok := registry[name]
	regMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q: built-in providers are %v; external ones are binaries named berth-provider-NAME on PATH", ErrUnknownProvider, name, Names())
	}
	return f(), nil
}
