// Package sshdtest starts a stock OpenSSH server for tests: the server real
// instances run, with its default refusal of SSH env requests (AcceptEnv is
// empty), so that berth's SSH paths are checked against it and not only
// against berth's own Go servers.
package sshdtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Server is one running OpenSSH server and how to log in to it.
type Server struct {
	// Addr is host:port on loopback.
	Addr string
	// HostKey is the server's host key as an authorized_keys line.
	HostKey string
	// UserKey is the PEM private key that logs in as User; UserKeyFile holds it.
	UserKey     []byte
	UserKeyFile string
	// User is the login user (root: sshd must run as root to open sessions).
	User string
}

// Start starts Debian's /usr/sbin/sshd on a free loopback port with
// OpenSSH's compiled-in defaults (-f /dev/null), giving only the port, a
// fresh host key and one authorized key, and stops it when t ends. It skips
// t when sshd is not installed or the test does not run as root.
func Start(t *testing.T) *Server {
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
	return &Server{Addr: addr, HostKey: hostPub, UserKey: userKey, UserKeyFile: filepath.Join(dir, "user_ed25519"), User: "root"}
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
