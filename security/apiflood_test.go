//go:build linux

package security_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/manager"
)

// berthUnderTest is a whole berth (manager, HTTP API, local provider)
// running in this process on a fresh state dir.
type berthUnderTest struct {
	cfg   *config.Config
	addr  string
	token string
}

func startBerth(t *testing.T) *berthUnderTest {
	t.Helper()
	dir := t.TempDir()
	toml := fmt.Sprintf("listen = \"127.0.0.1:0\"\nstate_dir = %q\n[autoscaler]\nprovider = \"local\"\nmax_instances = 2\ndelete_instances_on_shutdown = true\n", dir)
	cfg, err := config.Parse([]byte(toml), filepath.Join(dir, "berth.toml"))
	must(t, err)
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	m, err := manager.New(ctx, cfg, slog.New(slog.DiscardHandler), manager.Options{Ready: ready, UpdateInterval: 200 * time.Millisecond, ShutdownGrace: time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("berth stopped with %v", err)
		}
	})
	b := &berthUnderTest{cfg: cfg}
	select {
	case b.addr = <-ready:
	case err := <-done:
		t.Fatalf("berth did not start: %v", err)
	}
	b.token, err = api.ReadTokenFile(filepath.Join(dir, "api-token"))
	must(t, err)
	return b
}

// serverConns counts the established TCP connections whose local end is
// port and that belong to a descriptor: berth's side of the API
// connections it accepted (the test's own client ends have other local
// ports; connections still in the kernel's accept queue have no inode).
func serverConns(t *testing.T, port int) int {
	t.Helper()
	n := 0
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "01" || fields[9] == "0" { // 01: ESTABLISHED; field 10: inode
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				n++
			}
		}
		f.Close()
	}
	return n
}

// idleConn opens a keep-alive connection, sends one /healthz request (no
// token needed) and leaves the connection idle.
func idleConn(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// p99 of n requests to path, each on a new connection.
func apiP99(t *testing.T, b *berthUnderTest, path string, n int) time.Duration {
	t.Helper()
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var took []time.Duration
	for range n {
		req, err := http.NewRequest("GET", "http://"+b.addr+path, nil)
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+b.token)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s during the flood: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s during the flood: %s", path, resp.Status)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[(len(took)*99)/100]
}

// TestAPIFloodDoesNotStarveBerth holds four times max_connections idle
// keep-alive connections to the API (no token needed for /healthz) and
// checks that berth keeps at most max_connections of them open, still
// answers listings and still runs a job.
func TestAPIFloodDoesNotStarveBerth(t *testing.T) {
	b := startBerth(t)
	_, portStr, _ := net.SplitHostPort(b.addr)
	port, _ := strconv.Atoi(portStr)
	limit := b.cfg.MaxConnections
	n := 4 * limit
	raiseNoFile(t, n)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := idleConn(b.addr)
		if err != nil {
			t.Fatalf("flood connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	// Let berth work through the accept queue.
	held := serverConns(t, port)
	for end := time.Now().Add(30 * time.Second); held > limit+8 && time.Now().Before(end); held = serverConns(t, port) {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("attacker opened %d idle connections; berth holds %d (max_connections %d)", n, held, limit)
	if held > limit+8 {
		t.Errorf("berth holds %d API connections open, more than max_connections %d", held, limit)
	}

	health := apiP99(t, b, "/healthz", 100)
	list := apiP99(t, b, "/api/v1/instances", 100)
	c := api.NewClient("http://" + b.addr)
	c.Token = b.token
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	submitted := time.Now()
	job, err := c.Submit(ctx, api.JobRequest{Script: "echo hello"})
	must(t, err)
	for !job.State.Done() {
		time.Sleep(20 * time.Millisecond)
		if job, err = c.Job(ctx, job.ID); err != nil {
			t.Fatalf("job status during the flood: %v", err)
		}
	}
	if job.State != api.JobSuccess {
		t.Fatalf("job during the flood ended %s", job.State)
	}
	started := "?"
	if job.StartedAt != nil {
		started = job.StartedAt.Sub(submitted).String()
	}
	t.Logf("during the flood: /healthz p99 %v, /api/v1/instances p99 %v, a job started %s after submit and ended after %v",
		health, list, started, time.Since(submitted))
}
