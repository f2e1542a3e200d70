package providertest_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/providertest"
)

// The suite passes against a stock OpenSSH server, as on a real AMI: its
// default configuration refuses SSH env requests (AcceptEnv is empty), so
// the SSH check must pass its environment the way the executor does. The
// instances are Debian's sshd, started on a loopback port with OpenSSH's
// compiled-in defaults (-f /dev/null); only the port, the host key and
// the authorized key are given.
func TestConformanceAgainstStockOpenSSH(t *testing.T) {
	srv := startStockSSHD(t)
	providertest.Run(t, func(*testing.T) provider.InstanceGroup { return &sshdGroup{srv: srv} },
		provider.Settings{StateDir: t.TempDir()})
}

// stockSSHD is one running OpenSSH server and how to log in to it.
type stockSSHD struct {
	addr    string
	hostKey string // authorized_keys line
	userKey []byte // PEM private key
	user    string
}

func startStockSSHD(t *testing.T) *stockSSHD {
	t.Helper()
	const sshd = "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Skipf("%s not installed: apt-get install openssh-server (.ci/run does)", sshd)
	}
	if os.Geteuid() != 0 {
		t.Skip("sshd must run as root to open sessions as the login user (CI runs as root)")
	}
	// Debian's sshd refuses to start without its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hostPub := writeKey(t, filepath.Join(dir, "host_ed25519"))
	userPub := writeKey(t, filepath.Join(dir, "user_ed25519"))
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), []byte(userPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	userKey, err := os.ReadFile(filepath.Join(dir, "user_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(sshd, "-D", "-e", "-f", "/dev/null", "-p", port,
		"-o", "ListenAddress=127.0.0.1",
		"-o", "HostKey="+filepath.Join(dir, "host_ed25519"),
		"-o", "AuthorizedKeysFile="+filepath.Join(dir, "authorized_keys"),
		"-o", "PidFile=none",
		// The key files live in a temporary directory, not under the
		// user's home, where StrictModes' ownership walk does not apply.
		"-o", "StrictModes=no")
	var log strings.Builder
	var logMu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return log.Write(p) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			logMu.Lock()
			t.Logf("sshd log:\n%s", log.String())
			logMu.Unlock()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd does not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &stockSSHD{addr: addr, hostKey: hostPub, userKey: userKey, user: "root"}
}

func writeKey(t *testing.T, path string) (authorized string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
}

func freeLoopbackAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// sshdGroup is a provider whose instances are logins to one stock sshd: it
// hands out as many as asked, as a cloud would, and forgets deleted ones.
type sshdGroup struct {
	srv  *stockSSHD
	mu   sync.Mutex
	next int
	live map[string]bool
}

func (g *sshdGroup) Init(context.Context, provider.Settings) (provider.Info, error) {
	g.live = map[string]bool{}
	return provider.Info{ID: "stock-sshd", MaxSize: 10, Version: "test"}, nil
}

func (g *sshdGroup) Update(_ context.Context, fn func(string, provider.State)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id := range g.live {
		fn(id, provider.StateRunning)
	}
	return nil
}

func (g *sshdGroup) Increase(_ context.Context, n int) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range n {
		g.next++
		g.live[fmt.Sprintf("sshd-%d", g.next)] = true
	}
	return n, nil
}

func (g *sshdGroup) Decrease(_ context.Context, ids []string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		delete(g.live, id) // deleting a deleted instance succeeds, as the contract asks
	}
	return ids, nil
}

func (g *sshdGroup) ConnectInfo(_ context.Context, id string) (provider.ConnectInfo, error) {
	if err := g.Heartbeat(context.Background(), id); err != nil {
		return provider.ConnectInfo{}, err
	}
	return provider.ConnectInfo{ID: id, Addr: g.srv.addr, Username: g.srv.user, HostKey: g.srv.hostKey,
		PrivateKey: g.srv.userKey, OS: runtime.GOOS, Arch: runtime.GOARCH}, nil
}

func (g *sshdGroup) Heartbeat(_ context.Context, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.live[id] {
		return fmt.Errorf("unknown instance %s", id)
	}
	return nil
}

func (g *sshdGroup) Shutdown(context.Context) error { return nil }
