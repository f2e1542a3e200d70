//go:build linux

package local

import (
	"log/slog"
	"net"
	"testing"
	"time"
)

// TestPendingClosesSilentConnectionsFirst: when the table of
// unauthenticated connections is full, the oldest connection that has
// sent nothing goes first; one that has spoken goes only when all have.
func TestPendingClosesSilentConnectionsFirst(t *testing.T) {
	p := &pending{max: 2, log: slog.New(slog.DiscardHandler)}
	pipe := func() (server, client net.Conn) { return net.Pipe() }
	s1, _ := pipe()
	s2, c2 := pipe()
	talker := p.admit(s2)
	go c2.Write([]byte("SSH-2.0-berth\r\n"))
	if _, err := talker.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	silent := p.admit(s1)
	s3, _ := pipe()
	p.admit(s3) // full: the silent one goes, although the talker is older
	if _, err := silent.Write([]byte("x")); err == nil {
		t.Error("the silent connection was not closed")
	}
	if len(p.conns) != 2 || p.conns[0] != talker {
		t.Errorf("table after eviction: %v", p.conns)
	}
	p.done(talker)
	if len(p.conns) != 1 {
		t.Errorf("done left %d connections, want 1", len(p.conns))
	}
}

func TestAcceptBackoff(t *testing.T) {
	var b backoff
	var got []time.Duration
	for range 10 {
		got = append(got, b.next())
	}
	if got[0] != 5*time.Millisecond || got[1] != 10*time.Millisecond || got[9] != acceptBackoffMax {
		t.Errorf("backoff %v: want 5ms doubling up to %v", got, acceptBackoffMax)
	}
	b.reset()
	if d := b.next(); d != 5*time.Millisecond {
		t.Errorf("after reset: %v", d)
	}
}
