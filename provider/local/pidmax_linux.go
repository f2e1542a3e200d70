package local

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// threadsPerSandbox is about how many host task IDs (threads and
// processes) one sandbox with a running job holds: its PID 1, a Go program
// with GOMAXPROCS=1 (7 tasks in an idle sandbox), the job's shell and
// command, and for image jobs the launcher and the job runner. Measured in
// wave 5, before the launcher became lazy: 16,190 host tasks with 1,000
// sandboxes up.
const threadsPerSandbox = 12

// pidMaxAdvice says how many sandboxes kernel.pid_max leaves room for and,
// when that is under wantSandboxes, what to do about it. Past the limit the
// kernel refuses new threads: a sandbox's Go runtime that cannot start one
// aborts, so sandboxes die and their jobs fail as lost (seen at about 2,050
// sandboxes with the kernel's default pid_max of 32,768).
func pidMaxAdvice(pidMax int) (fits int, warn bool) {
	fits = pidMax / threadsPerSandbox
	return fits, fits < wantSandboxes
}

// wantSandboxes is the number of sandboxes one berth is built to run at
// once (README, "Scale").
const wantSandboxes = 10000

// checkPidMax logs one line when the host's pid_max caps the number of
// sandboxes below wantSandboxes, with the command that raises it.
func checkPidMax(log *slog.Logger) {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return
	}
	pidMax, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return
	}
	if fits, warn := pidMaxAdvice(pidMax); warn {
		log.Warn("kernel.pid_max leaves room for few sandboxes: past it their threads cannot start and they die with their jobs; raise it with `sysctl -w kernel.pid_max=4194304` (systemd's default) and in /etc/sysctl.d",
			"pid_max", pidMax, "sandboxes_that_fit", fits, "tasks_per_sandbox", threadsPerSandbox)
	}
}
