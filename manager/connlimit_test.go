package manager

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestConnLimitClosesIdleConnections holds more idle keep-alive
// connections than the limit and checks that the server closed the oldest
// ones and still answers a new client.
func TestConnLimitClosesIdleConnections(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const max = 16
	ln := newConnLimit(raw, max, slog.New(slog.DiscardHandler))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		ConnState: ln.track}
	go srv.Serve(ln)
	defer srv.Close()
	addr := raw.Addr().String()

	var conns []net.Conn
	for range 3 * max {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		conns = append(conns, c)
		time.Sleep(time.Millisecond) // let the server go idle on it, in order
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr)
	if err != nil {
		t.Fatalf("a new client during the flood: %v", err)
	}
	resp.Body.Close()
	// The first connections were closed by the server: reading reaches EOF
	// after their one response.
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := io.ReadAll(c); err == nil {
			closed++
		}
	}
	if closed < 2*max {
		t.Errorf("the server closed %d of %d idle connections, want at least %d (limit %d)", closed, len(conns), 2*max, max)
	}
	ln.mu.Lock()
	open := len(ln.conns)
	ln.mu.Unlock()
	if open > max {
		t.Errorf("%d connections tracked open, limit %d", open, max)
	}
}

// TestConnLimitCloseWakesAccept: with every slot busy Accept waits, and
// Close (server shutdown) ends the wait.
func TestConnLimitCloseWakesAccept(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newConnLimit(raw, 1, slog.New(slog.DiscardHandler))
	busy, _ := net.Pipe()
	ln.conns[busy] = connInfo{busy: true}
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("Accept returned %v with every slot busy", err)
	case <-time.After(100 * time.Millisecond):
	}
	ln.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
}
