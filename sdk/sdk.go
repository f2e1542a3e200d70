// Package sdk is what a berth provider plugin is built with: implement
// InstanceGroup (and optionally Suspender, Notifier, Recycler and
// RequestedSizer) and call Serve from main.
//
//	func main() {
//		sdk.Serve(&myGroup{})
//	}
//
// The plugin is a separate binary named berth-provider-NAME that berth starts
// and talks to over hashicorp/go-plugin (gRPC, versioned handshake). Its
// stdout belongs to the plugin protocol; log through log/slog (Serve routes
// the default logger to berth, which prints each line with the plugin's
// name) or write to stderr.
//
// The instance-group types are berth's own provider package's, re-exported
// here as aliases: that package depends on nothing but the standard library
// and is the contract berth's built-in providers implement too, so any
// provider.InstanceGroup is served unchanged, and a plugin author imports
// only this package. Nothing else of berth is needed to write a plugin.
//
// Check a plugin with `berth provider test ./berth-provider-NAME`, which runs
// berth's conformance suite against the built binary.
package sdk

import (
	"github.com/hashicorp/go-plugin"

	"github.com/berth-ci/berth/provider"
)

// InstanceGroup is the interface a plugin implements; see provider.InstanceGroup.
type InstanceGroup = provider.InstanceGroup

// Suspender is the optional suspend/resume capability. A plugin whose group
// implements it must also set Info.Capabilities.Suspend.
type Suspender = provider.Suspender

// Notifier is the optional capability of a group that learns by itself
// when an instance changes state (see provider.Notifier). A plugin whose
// group implements it must also set Info.Capabilities.Notify; berth then
// hears of an instance that became running at once instead of at its next
// listing.
type Notifier = provider.Notifier

// Recycler is the optional capability of a group that can reset an instance
// between two jobs (see provider.Recycler). A plugin whose group implements
// it must also set Info.Capabilities.Recycle; berth then resets an instance
// with one slot after every job.
type Recycler = provider.Recycler

// RequestedSizer is the optional capability of a group that keeps the
// number of instances it was asked for, as a cloud's group does (see
// provider.RequestedSizer). A plugin whose group implements it must also
// set Info.Capabilities.RequestedSize; berth then reads it once after a
// restart and drops at once the increases it had pending that never
// reached the cloud, instead of counting them toward max_instances for
// two minutes.
type RequestedSizer = provider.RequestedSizer

// Settings is what Init receives: the provider_config as JSON, a state
// directory and the host paths instances must never see.
type Settings = provider.Settings

// Info describes an initialised instance group.
type Info = provider.Info

// Capabilities lists optional features of a group.
type Capabilities = provider.Capabilities

// ConnectInfo tells berth how to reach an instance over SSH. A plugin that
// cannot know an instance's host key leaves HostKey empty; berth then trusts
// the key it sees on first connection and records it (trust on first use).
type ConnectInfo = provider.ConnectInfo

// State is an instance's state.
type State = provider.State

// Instance states reported by Update.
const (
	StateCreating   = provider.StateCreating
	StateRunning    = provider.StateRunning
	StateSuspending = provider.StateSuspending
	StateSuspended  = provider.StateSuspended
	StateResuming   = provider.StateResuming
	StateDeleting   = provider.StateDeleting
	StateDeleted    = provider.StateDeleted
	StateTimeout    = provider.StateTimeout
)

// ProtocolVersion is the newest plugin protocol version this SDK speaks.
// Host and plugin agree on the highest version both speak during the
// handshake; a plugin built with an SDK that shares no version with the
// host is refused with an error naming both sides' versions.
const ProtocolVersion = 1

// PluginName is the name of the instance-group plugin in the plugin set.
const PluginName = "instance_group"

// Handshake is the go-plugin handshake. The cookie is not a secret: it only
// keeps a plugin binary from being run by hand by mistake.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "BERTH_PROVIDER_PLUGIN",
	MagicCookieValue: "b3f1c0de-berth-instance-group",
}

// PluginSets returns the plugins of every protocol version this SDK speaks,
// serving impl (nil on the host side).
func PluginSets(impl InstanceGroup) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		1: {PluginName: &GRPCPlugin{Impl: impl}},
	}
}
