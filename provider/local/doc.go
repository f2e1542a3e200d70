// Package local is berth's embedded default provider: every instance is a
// Linux sandbox that behaves like a small VM, with its own user, PID, mount,
// UTS, IPC and (by default) network namespaces and a built-in SSH server.
//
// # How a sandbox runs
//
// Increase executes berth-sandbox, a lean binary that links only this
// package, when one lies beside the running binary, is safe to run and is
// the same build (sandboxbin_linux.go); else it re-executes the current
// binary (/proc/self/exe). Either runs with the environment marker
// BERTH_LOCAL_SANDBOX set. The child starts as PID 1 of a
// fresh PID namespace; RunSandboxIfRequested, which main and every TestMain
// that starts sandboxes must call first, notices the marker, builds the
// sandbox's file system, serves SSH and reaps zombies until it is killed. The
// child runs in its own session with its output going to a log file in its
// directory, so instances outlive the berth process: a berth killed with
// SIGKILL leaves them running, and a new provider on the same state
// directory adopts them through Update.
//
// berth does not clone the sandboxes itself: a small spawner process (the
// same binary, started at the first sandbox with BERTH_LOCAL_SPAWNER_FD
// set; spawner_linux.go) does, on berth's request over a socket pair that
// carries the sandbox's descriptors, and returns its pidfd, which berth's
// reaper watches. A clone from berth copied berth's page tables (Go cannot
// vfork into a new user namespace) and its exec closed berth's thousands of
// descriptors, ~2 ms of CPU per sandbox in a busy berth. The spawner reaps
// the sandboxes and exits when berth's end of the socket closes. A spawner
// that dies or stops answering for 30 s is killed and replaced with one log
// line (the sandbox it was starting fails and is cleaned up); after three
// failures within an hour, when it cannot start, or with
// BERTH_LOCAL_SPAWNER=off, berth starts sandboxes itself.
//
// # What a job sees and may do
//
// Every sandbox has its own user namespace, also when berth runs as root.
// Unprivileged, the caller's uid is root inside. As root, the sandbox's IDs
// 0..65535 map to a subordinate range: the "berth" entries of /etc/subuid
// and /etc/subgid when present, else 1879048192..1879113727 (just above the
// range systemd reserves for containers). Host uid 0 is never mapped, so
// root in a job holds no capability on the host.
//
// The host file system is an allowlist: each path of host_paths (default
// /usr /bin /sbin /lib /lib32 /lib64 /libx32 /etc /opt, missing ones
// skipped) is bound read-only. /berth (HOME and the working directory) is
// the instance's writable disk, /tmp its private writable directory, /proc
// a procfs of the sandbox's PID namespace, and /dev a read-only tmpfs with
// null, zero, full, random, urandom and tty from the host, a devpts of its
// own (ptmx) and a private 64 MiB /dev/shm. Nothing else exists: no /sys,
// /home, /root, /var, /run, no host devices. A private path (Settings.Private:
// berth's state dir, config file, token files; and always the provider's
// state dir) inside a host path is hidden by an empty read-only tmpfs over
// it: a private directory itself, a private file by its directory when
// that is berth's own (/etc/berth for /etc/berth/berth.toml). Init refuses
// to start, naming the path and the key to change, where that cannot hide
// it: a private file directly in a host path or in a directory not
// berth's own, a host path inside a private path, a missing private path.
//
// PID 1 sets this up, makes itself non-dumpable, ignores the signals that
// would end it, and starts every command from one thread of its own that
// has no_new_privs and a seccomp filter (see deniedSyscalls: the mount
// family, ptrace, open_by_handle_at, kexec, modules, clock, keyring, bpf,
// perf, userfaultfd and more; system calls of a foreign ABI kill the
// caller), which every command inherits. PID 1's other threads get the
// filter too (TSYNC) once it has started the image launcher, for the
// sandbox's first image job (jobroot_linux.go, jobthread_linux.go); a sandbox
// that never runs one has no launcher. Every command then starts in a user
// namespace nested in the sandbox's, with its own mount, UTS and IPC
// namespaces: the kernel locks every mount copied into a namespace owned by
// a less privileged user namespace, so even root in a job cannot unmount,
// remount or move what PID 1 set up. A job's hostname change and System V
// IPC objects die with it.
//
// Between jobs the manager calls Recycle (provider.Recycler): PID 1 kills
// every other process of the PID namespace, empties /tmp, /dev/shm and
// /berth and resets the hostname. If that fails the sandbox is killed, so
// the next job never sees the last one's leftovers. A parked (suspended)
// environment is never recycled: the job that resumes it sees what the
// parking job left.
//
// Network: "isolated" (the default) gives each sandbox a network namespace
// with only loopback, so jobs reach neither berth's API nor other sandboxes'
// SSH ports on the host's loopback. "host" shares the host's network.
//
// The SSH server listens on a host loopback socket (127.0.0.1, random port)
// that the provider opens before the clone and passes as an inherited file
// descriptor. That keeps the sandbox reachable whatever its network mode, and
// needs no privileges. The sandbox gets everything else from its instance
// directory as inherited descriptors too (the configuration through a pipe;
// as root, the disk and tmp directories as detached mounts from open_tree),
// because a subordinate uid may not be able to reach that directory.
//
// A sandbox this process started also gets one end of an exec socket pair
// (localexec_linux.go): ConnectInfo.Local hands the executor berth's end,
// and jobs run through it without SSH. Sandboxes adopted after a restart,
// and the berth-provider-local plugin, keep using SSH.
//
// # Configuration
//
// Settings.Config ([autoscaler.provider_config]) is a JSON object; unknown
// keys are rejected so typos surface at start:
//
//	{
//	  "network":    "isolated", // default; "auto" is the same; "host" shares the
//	                            // host's network, loopback services included
//	  "host_paths": ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
//	                 "/libx32", "/etc", "/opt"],  // read-only host paths, the default
//	  "memory_max": "2G",       // optional cgroup v2 memory.max per instance
//	  "cpu_max":    "200000 100000", // optional cgroup v2 cpu.max (here: 2 CPUs)
//	  "pids_max":   4096,       // pids.max, or RLIMIT_NPROC without a pids
//	                            // cgroup; default 4096, 0 = no limit
//	  "disk_max":   "20G",      // /berth, /tmp and image jobs' writable layers per
//	                            // instance; default a quarter of the state dir's
//	                            // file system, "0" = no limit
//	  "disk_reserve": "1G",     // free space no job eats into; default 5% of the
//	                            // file system, at most 1G, "0" = none
//	  "inodes_max": 250000,     // files and directories, as disk_max counts bytes;
//	                            // default a quarter of the file system's inodes
//	  "inodes_reserve": 100000, // free inodes no job eats into; default 5% of
//	                            // them, at most 100,000, 0 = none
//	  "keep_groups": false,     // unprivileged: accept supplementary groups jobs keep
//	  "image_builds": false     // plain jobs may bind, change propagation and
//	                            // remount binds read-only (buildah bud); off by default
//	}
//
// memory_max and cpu_max need berth to run as root on a host whose cgroup
// v2 tree offers the controller to berth's cgroup; set where that is not so,
// they are an error at start.
//
// # State layout
//
// Under Settings.StateDir the provider keeps local/client_key (the group's
// SSH client key, generated once) and local/instances/ID/ with meta.json
// (pid, process start time, address, host key, desired state), host_key,
// disk/ (mounted at /berth), tmp/ (mounted at /tmp), sandbox.pid, ready and
// sandbox.log.
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
