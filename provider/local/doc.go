// Package local is berth's embedded default provider: every instance is a
// Linux sandbox that behaves like a small VM, with its own PID, mount, UTS and
// IPC namespaces and a built-in SSH server.
//
// # How a sandbox runs
//
// Increase re-executes the current binary (/proc/self/exe) with the
// environment marker BERTH_LOCAL_SANDBOX set. The child starts as PID 1 of a
// fresh PID namespace; RunSandboxIfRequested, which main and every TestMain
// that starts sandboxes must call first, notices the marker, builds the
// sandbox's file system, serves SSH and reaps zombies until it is killed. The
// child runs in its own session with its output going to a log file in its
// directory, so instances outlive the berth process: a berth killed with
// SIGKILL leaves them running, and a new provider on the same state
// directory adopts them through Update.
//
// Inside a sandbox the hostname is the instance ID, the host file system is
// visible read-only, /berth (also HOME and the working directory of every
// command) is the instance's writable disk, /tmp is a private writable
// directory, /proc shows only the sandbox's own processes, and the provider's
// state directory is hidden. Commands run as root inside the sandbox. When
// berth runs unprivileged, the sandbox also gets a user namespace that maps
// the caller to uid 0, so "root" inside has no more rights on the host than
// the caller.
//
// A sandbox isolates jobs from each other and from the host's view; it is
// not a security boundary when berth runs as root, because root inside is
// then the host's root (with /dev shared). Run berth unprivileged when jobs
// are untrusted.
//
// The SSH server listens on a host loopback socket (127.0.0.1, random port)
// that the provider opens before the clone and passes as an inherited file
// descriptor. That keeps the sandbox reachable whatever its network mode, and
// needs no privileges.
//
// # Configuration
//
// Settings.Config ([autoscaler.provider_config]) is a JSON object; unknown
// keys are rejected so typos surface at start:
//
//	{
//	  "network":    "auto",   // "auto" or "host": share the host's network (default);
//	                          // "isolated": own network namespace with only loopback
//	                          // (jobs have no network; SSH still works)
//	  "memory_max": "2G"      // optional cgroup v2 memory.max per instance; needs a
//	                          // writable cgroup v2 tree with the memory controller
//	}
//
// # State layout
//
// Under Settings.StateDir the provider keeps local/client_key (the group's
// SSH client key, generated once) and local/instances/ID/ with meta.json
// (pid, process start time, address, host key, desired state), host_key,
// disk/ (mounted at /berth), tmp/, root/ (mount point of the sandbox's root)
// and sandbox.log.
//
// # Instance states
//
// Update reports "creating" (or "resuming") until the sandbox's SSH server is
// serving, then "running"; "suspended" for suspended instances; "deleting"
// while a deletion is unfinished. A sandbox whose process died, or that did
// not finish booting within two minutes, is reported as "timeout": its
// directory is still there and the scaler should Decrease it. Nothing is
// hidden.
//
// The provider implements provider.Notifier: an inotify watch on each
// booting instance's directory sees the sandbox write its ready file as it
// starts serving SSH, and the registered function hears
// "running" within microseconds, so berth need not wait for its next
// listing. Instances that a previous berth process left booting are watched
// from the first Notify on.
//
// # Killing, suspending
//
// When a writable cgroup v2 tree with cgroup.kill is found (as root, usually),
// each instance gets its own cgroup: Decrease uses cgroup.kill and Suspend
// freezes the cgroup (cgroup.freeze). Otherwise Decrease kills the sandbox's
// PID 1, which makes the kernel kill every process in its PID namespace, and
// Suspend stops the sandbox while keeping its directory; Resume then starts a
// new sandbox with the same ID, directory and host key, so files survive
// but running processes do not. The suspended state is in meta.json and
// survives berth restarts.
//
// # Deployment notes
//
// One state directory belongs to one berth process at a time. Under systemd,
// use KillMode=process (or Delegate=yes with a dedicated slice) so that
// restarting the berth service does not kill its instances' cgroups.
package local

import "github.com/berth-ci/berth/provider"

// Name is the name the provider is registered under.
const Name = "local"

func init() {
	provider.Register(Name, func() provider.InstanceGroup { return New() })
}
