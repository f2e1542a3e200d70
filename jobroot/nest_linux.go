package jobroot

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwardedSignals are the signals a job's init passes on to a nested
// command: the ones a CI system or a user sends to stop or poke a job.
var forwardedSignals = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2}

// runNested starts the job's command as the init's child in a user and
// mount namespace nested in the init's, mapping the same IDs one to one:
// the kernel locks every mount copied into a mount namespace owned by a
// less privileged user namespace, so the command cannot unmount the /proc
// masks or bind /proc without them, whatever mount calls HardenMounts'
// filter lets through. The init stays PID 1: it passes signals on, reaps
// orphans, and exits with the command's status (128+N for signal N, as
// waitInit reports a signalled init). It returns only on failure.
func runNested(is initSpec, argv0 string) error {
	uids, err := IdentityMap("/proc/self/uid_map")
	if err != nil {
		return err
	}
	gids, err := IdentityMap("/proc/self/gid_map")
	if err != nil {
		return err
	}
	sg, err := os.ReadFile("/proc/self/setgroups")
	if err != nil {
		return err
	}
	setgroups := strings.TrimSpace(string(sg)) == "allow"
	// On the init itself, so that the command inherits filter and
	// no_new_privs from the start.
	if err := HardenMounts(); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	p, err := os.StartProcess(argv0, is.Argv, &os.ProcAttr{
		Env:   is.Env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNS,
			UidMappings: uids, GidMappings: gids, GidMappingsEnableSetgroups: setgroups,
			Credential: &syscall.Credential{Uid: uint32(is.UID), Gid: uint32(is.GID), NoSetGroups: !setgroups},
		},
	})
	if err != nil {
		return fmt.Errorf("start %s in a nested namespace: %w", argv0, err)
	}
	go func() {
		for s := range sigs {
			p.Signal(s)
		}
	}()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for the job's command: %w", err)
		}
		if pid != p.Pid {
			continue // an orphan
		}
		if ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(ws.ExitStatus())
	}
}

// IdentityMap turns the caller's ID map (a /proc/self/uid_map or gid_map
// file) into one that maps each of its IDs to itself in a child namespace.
func IdentityMap(file string) ([]syscall.SysProcIDMap, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var m []syscall.SysProcIDMap
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var inside, outside, n int
		if _, err := fmt.Sscan(sc.Text(), &inside, &outside, &n); err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		m = append(m, syscall.SysProcIDMap{ContainerID: inside, HostID: inside, Size: n})
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%s is empty", file)
	}
	return m, sc.Err()
}
