package local

import "github.com/berth-ci/berth/jobroot"

// Jobs in images get the sandbox's own seccomp filter and no_new_privs
// before their command starts, so they end up under the same restrictions
// as plain jobs.
func init() { jobroot.Harden = loadSeccomp }
