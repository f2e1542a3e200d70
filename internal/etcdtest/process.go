package etcdtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// BinaryEnv names the environment variable that runs every member as a
// process of an etcd binary instead of inside the test process.
const BinaryEnv = "BERTH_ETCD_BINARY"

// process is a member running as a process of an etcd binary. Its output
// goes to <data dir>.log, for a test that failed.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	health string
	log    string
}

// startProcess starts binary with the flags that say what cfg says.
// Stopping it kills it: an outage, which etcd recovers from on its data.
func startProcess(binary string, cfg *embed.Config) (*process, error) {
	log := cfg.Dir + ".log"
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(binary, processFlags(cfg)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{}),
		health: cfg.AdvertiseClientUrls[0].String() + "/health", log: log}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func processFlags(cfg *embed.Config) []string {
	return []string{
		"--name", cfg.Name,
		"--data-dir", cfg.Dir,
		"--listen-peer-urls", cfg.ListenPeerUrls[0].String(),
		"--initial-advertise-peer-urls", cfg.AdvertisePeerUrls[0].String(),
		"--listen-client-urls", cfg.ListenClientUrls[0].String(),
		"--advertise-client-urls", cfg.AdvertiseClientUrls[0].String(),
		"--initial-cluster", cfg.InitialCluster,
		"--initial-cluster-token", cfg.InitialClusterToken,
		"--initial-cluster-state", "new",
		"--quota-backend-bytes", strconv.FormatInt(cfg.QuotaBackendBytes, 10),
		"--bcrypt-cost", strconv.Itoa(int(cfg.BcryptCost)),
		"--logger", "zap", "--log-outputs", "stderr",
	}
}

// ready polls the member's /health, which says true once its cluster has
// a leader.
func (p *process) ready(deadline <-chan time.Time) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.healthy() {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("etcd exited: %v (see %s)", p.cmd.ProcessState, p.log)
		case <-deadline:
			return fmt.Errorf("not ready after %s", startTimeout)
		case <-tick.C:
		}
	}
}

func (p *process) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.health, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}

// Close kills the process and waits for it.
func (p *process) Close() {
	p.cmd.Process.Kill()
	<-p.exited
}
