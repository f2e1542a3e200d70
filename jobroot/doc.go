// Package jobroot runs one job with an OCI image as its root file system,
// on the instance itself: it is the in-instance job runner.
//
// The executor starts the berth binary on the instance with BERTH_JOBROOT=run
// and sends a Spec as the first line of stdin, followed by the job's own
// stdin. The runner
//
//  1. makes the image ready in the instance's image cache (package images),
//  2. makes a fresh job directory with an empty upper and work directory,
//  3. re-executes itself as the job's init in new user, mount, PID, UTS and
//     IPC namespaces; the init mounts an overlay of the image's layers
//     (read-only, shared) under the job's upper directory, a private /proc,
//     a minimal /dev, the configured bind mounts (the build directory),
//     pivots into it, drops everything of the instance's file system, sets
//     no_new_privs and the sandbox's seccomp filter (Harden), switches to
//     the image's user and executes the job's command;
//  4. waits, and removes the job directory: nothing the job wrote into the
//     image survives into the next job.
//
// The image's layers are never written: every write lands in the job's
// upper directory. The init dies with the runner (PDEATHSIG), and the whole
// PID namespace with the init, so an SSH session that is killed takes the
// job with it.
//
// Needs: Linux ≥ 5.11 (overlayfs in a user namespace) with unprivileged user
// namespaces, or root.
package jobroot
