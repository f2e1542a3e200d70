package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/berth-ci/berth/internal/cloexec"
	"golang.org/x/sys/unix"
)

// The sandbox spawner is a small process berth starts once (from the same
// binary sandboxes start from) and asks to start each sandbox.
//
// Starting a sandbox from berth itself cost berth ~1 ms of CPU per sandbox
// beyond the work of the clone, growing with berth's size: Go cannot use
// vfork for a clone with a new user namespace (the child waits for its uid
// map), so the kernel copied berth's page tables (tens of MiB of heap with
// 1,000 sandboxes), and the child's exec then closed every one of berth's
// thousands of close-on-exec descriptors (the sandboxes' sockets) and tore
// the copied address space down again. The spawner has a few MiB of memory
// and a handful of descriptors, so its clones are cheap.
//
// berth sends one request per sandbox over a SOCK_SEQPACKET socket pair:
// the command (argv, environment, clone flags, ID maps) as JSON and the
// sandbox's descriptors with SCM_RIGHTS. The spawner clones with
// CLONE_PIDFD and CLONE_INTO_CGROUP and answers with the PID and the pidfd,
// which berth's reaper (reap_linux.go) watches like the pidfd of a child of
// its own. The spawner reaps its children (the sandboxes) itself. It
// exits when berth's end of the socket closes; sandboxes outlive it as they
// outlive berth. See spawnerclient_linux.go for berth's side: a spawner that
// dies or stops answering is replaced, and berth forks sandboxes itself
// when none can run.

// spawnerEnv marks the spawner process; its value is the descriptor number
// of the socket to berth.
const spawnerEnv = "BERTH_LOCAL_SPAWNER_FD"

// spawnRequest is the JSON part of a request. The descriptors come in this
// order: the log file (stdout and stderr), then Files descriptors for fd 3
// onwards, then the cgroup directory when Cgroup is set.
type spawnRequest struct {
	Args  []string `json:"args"`
	Env   []string `json:"env"`
	Files int      `json:"files"`
	// Cloneflags, the ID maps and Credential are those of the
	// syscall.SysProcAttr berth would have used itself.
	Cloneflags  uintptr                `json:"cloneflags"`
	UidMappings []syscall.SysProcIDMap `json:"uid_mappings"`
	GidMappings []syscall.SysProcIDMap `json:"gid_mappings"`
	Setgroups   bool                   `json:"setgroups"`
	RootCred    bool                   `json:"root_cred"` // setuid/setgid 0 in the new user namespace
	Setsid      bool                   `json:"setsid"`
	Cgroup      bool                   `json:"cgroup"`
}

// spawnReply answers a request; the pidfd comes with it when Err is empty.
type spawnReply struct {
	PID int    `json:"pid"`
	Err string `json:"err,omitempty"`
}

// spawnerMaxMsg bounds one request (argv and environment are small).
const spawnerMaxMsg = 64 << 10

// spawnerMaxFDs bounds the descriptors of one request.
const spawnerMaxFDs = 32

func init() {
	// The spawner is the same binary as berth or berth-sandbox; it is
	// told apart before anything else runs (as early as a package init
	// can), so that it never starts berth's own machinery.
	if v := os.Getenv(spawnerEnv); v != "" {
		os.Exit(runSpawner(v))
	}
}

// runSpawner serves berth's requests on the socket descriptor named by v
// until berth closes its end. It returns the exit code.
func runSpawner(v string) int {
	var sock int
	if _, err := fmt.Sscan(v, &sock); err != nil || sock < 3 {
		fmt.Fprintf(os.Stderr, "berth sandbox spawner: bad %s=%q\n", spawnerEnv, v)
		return 2
	}
	os.Unsetenv(spawnerEnv)
	// Descriptors berth inherited without close-on-exec (under go test, a
	// pipe at fd 251) reached the spawner too; no sandbox may get them.
	cloexec.Inherited() // sock included: a sandbox gets exactly what berth sends
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Fprintf(os.Stderr, "berth sandbox spawner: %v\n", err)
		return 1
	}
	go reapChildren()
	buf := make([]byte, spawnerMaxMsg)
	oob := make([]byte, unix.CmsgSpace(spawnerMaxFDs*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return 0 // berth is gone or closed its end: nothing more to do
		}
		fds := receivedFDs(oob[:oobn])
		reply, pidfd := spawnOne(buf[:n], fds, devNull)
		for _, fd := range fds {
			unix.Close(fd)
		}
		b, _ := json.Marshal(reply)
		var rights []byte
		if pidfd >= 0 {
			rights = unix.UnixRights(pidfd)
		}
		err = unix.Sendmsg(sock, b, rights, nil, 0)
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		if err != nil {
			return 0
		}
	}
}

// receivedFDs parses the descriptors of one message.
func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

// spawnOne starts the sandbox a request describes. It returns its pidfd,
// or -1 with the reason in the reply.
func spawnOne(msg []byte, fds []int, devNull *os.File) (spawnReply, int) {
	var req spawnRequest
	if err := json.Unmarshal(msg, &req); err != nil {
		return spawnReply{Err: "bad request: " + err.Error()}, -1
	}
	want := 1 + req.Files
	if req.Cgroup {
		want++
	}
	if len(fds) != want || len(req.Args) == 0 {
		return spawnReply{Err: fmt.Sprintf("bad request: %d descriptors for %d files", len(fds), req.Files)}, -1
	}
	files := []uintptr{devNull.Fd(), uintptr(fds[0]), uintptr(fds[0])}
	for _, fd := range fds[1 : 1+req.Files] {
		files = append(files, uintptr(fd))
	}
	pidfd := -1
	sys := &syscall.SysProcAttr{
		Setsid: req.Setsid, Cloneflags: req.Cloneflags,
		UidMappings: req.UidMappings, GidMappings: req.GidMappings,
		GidMappingsEnableSetgroups: req.Setgroups, PidFD: &pidfd,
	}
	if req.RootCred {
		sys.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	}
	if req.Cgroup {
		sys.UseCgroupFD, sys.CgroupFD = true, fds[len(fds)-1]
	}
	// The spawner's own binary is the one berth checked and started it
	// from, even if the file was replaced since.
	pid, err := syscall.ForkExec("/proc/self/exe", req.Args, &syscall.ProcAttr{Env: req.Env, Files: files, Sys: sys})
	if err != nil {
		return spawnReply{Err: err.Error()}, -1
	}
	if pidfd < 0 {
		unix.Kill(pid, unix.SIGKILL) // berth could not tell when it ends
		return spawnReply{Err: "the kernel returned no pidfd for the sandbox (Linux 5.3 or later is needed)"}, -1
	}
	return spawnReply{PID: pid}, pidfd
}

// reapChildren reaps the spawner's exited children (the sandboxes).
func reapChildren() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGCHLD)
	for range ch {
		for {
			pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if pid <= 0 {
				break
			}
		}
	}
}
