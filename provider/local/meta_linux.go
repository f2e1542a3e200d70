package local

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Desired states kept in meta.json. What Update reports is derived from
// these and from what the process and its ready marker show.
const (
	wantRunning   = "running"
	wantSuspended = "suspended"
	wantDeleting  = "deleting"
)

// meta is an instance's meta.json. It holds everything a later berth process
// needs to adopt the instance.
type meta struct {
	ID string `json:"id"`
	// State is the desired state: running, suspended or deleting.
	State string `json:"state"`
	// Boot is what Update reports while a started sandbox is not yet
	// serving: "creating" for a new one, "resuming" after Resume.
	Boot string `json:"boot,omitempty"`
	// PID and StartTime (field 22 of /proc/PID/stat) identify the sandbox's
	// init process; the start time guards against PID reuse. PID is 0 while
	// no sandbox process is meant to exist.
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	// Addr is the host loopback address of the SSH server.
	Addr string `json:"addr"`
	// HostKey is the instance's SSH host public key, authorized_keys format.
	HostKey string `json:"host_key"`
	// Cgroup is the instance's cgroup v2 directory, empty when none.
	Cgroup string `json:"cgroup,omitempty"`
	// PidsCgroup is the instance's cgroup v1 pids directory on hybrid
	// hosts (see pidsv1_linux.go), empty when none.
	PidsCgroup string    `json:"pids_cgroup,omitempty"`
	Network    string    `json:"network"`
	UserNS     bool      `json:"userns"`
	CreatedAt  time.Time `json:"created_at"`
	// StartedAt is when the current sandbox process was started; boot
	// timeouts count from here.
	StartedAt time.Time `json:"started_at"`
}

// sandboxConfig is what the sandbox process reads from its config pipe at
// start.
type sandboxConfig struct {
	ID            string   `json:"id"`
	Network       string   `json:"network"`
	AuthorizedKey string   `json:"authorized_key"`
	HostKey       string   `json:"host_key"` // PEM private key
	HostPaths     []string `json:"host_paths"`
	// Masks are directories inside host paths covered by an empty
	// read-only tmpfs: those that hold berth's private files (privateMasks).
	Masks []string `json:"masks,omitempty"`
	Probe bool     `json:"probe,omitempty"`
	// DiskMax is disk_max in bytes; 0 means no limit.
	DiskMax int64 `json:"disk_max,omitempty"`
	// DiskReserve is disk_reserve in bytes; 0 means none.
	DiskReserve int64 `json:"disk_reserve,omitempty"`
	// InodesMax and InodesReserve are inodes_max and inodes_reserve; 0
	// means none.
	InodesMax     int64 `json:"inodes_max,omitempty"`
	InodesReserve int64 `json:"inodes_reserve,omitempty"`
	// NProc, when not 0, is the RLIMIT_NPROC PID 1 sets for itself and
	// its jobs: the pids limit where no pids cgroup is available.
	NProc int `json:"nproc,omitempty"`
	// Slots is capacity_per_instance (0 when unknown): the namespace
	// quotas grow with the jobs that may run at once (namespaceQuota).
	Slots int `json:"slots,omitempty"`
	// Dir is the instance directory. DetachedMounts says that diskFD and
	// tmpFD are detached mounts (open_tree) to move into place; otherwise
	// the sandbox binds Dir's disk and tmp by path.
	Dir            string `json:"dir"`
	DetachedMounts bool   `json:"detached_mounts,omitempty"`
	// DiskPoller says that diskPollFD is berth's diskPoller socket: the
	// sandbox reports its disk walks there instead of polling the free
	// space itself.
	DiskPoller bool `json:"disk_poller,omitempty"`
	// Exec says that execFD is berth's exec socket: berth runs commands
	// through it without SSH (localexec_linux.go).
	Exec bool `json:"exec,omitempty"`
	// ImageBuilds is provider_config image_builds: the job filter lets
	// jobs bind, change propagation and remount binds read-only
	// (mountRules), and the root has an empty /sys for a build's mounts.
	ImageBuilds bool `json:"image_builds,omitempty"`
}

// Files in an instance directory.
const (
	metaFile    = "meta.json"
	hostKeyFile = "host_key"
	readyFile   = "ready"
	pidFile     = "sandbox.pid"
	logFile     = "sandbox.log"
	diskDir     = "disk"
	tmpDir      = "tmp"
)

// writeJSONStat writes v to path atomically (temp file + rename), so
// readers never see a half-written file even when berth dies mid-write. It
// returns the written file's stat (an fstat of the temp file, which the
// rename keeps), so that the caller can remember what it wrote without
// reading it back (see Provider.saveMeta).
// The JSON is compact: meta.json is read by berth, and by people through
// jq; indenting cost a fifth of its encoding time for nothing.
func writeJSONStat(path string, v any) (unix.Stat_t, error) {
	var st unix.Stat_t
	b, err := json.Marshal(v)
	if err != nil {
		return st, err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return st, err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = unix.Fstat(int(f.Fd()), &st)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return st, err
	}
	return st, os.Rename(tmp, path)
}

func readMeta(dir string) (*meta, error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w (remove the instance directory by hand if it is corrupt)", filepath.Join(dir, metaFile), err)
	}
	return &m, nil
}

// procStat returns the state letter and start time of a process from
// /proc/PID/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may contain spaces and parentheses; the
	// fields after the last ')' are fixed.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return f[0][0], start, err
}

// alive reports whether the process pid with the given start time still
// runs. Zombies count as dead: they only wait to be reaped.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, s, err := procStat(pid)
	if err != nil || s != start {
		return false
	}
	return st != 'Z' && st != 'X'
}

// readPIDFile reads the "PID STARTTIME" line a sandbox writes about itself.
// It covers the moment between starting a sandbox and recording its PID in
// meta.json, should berth die exactly then.
func readPIDFile(dir string) (int, uint64, bool) {
	b, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, 0, false
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscan(string(b), &pid, &start); err != nil {
		return 0, 0, false
	}
	return pid, start, true
}
