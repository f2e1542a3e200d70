package main

import (
	"bytes"
	"testing"
)

func TestTerminalSafe(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain text and colours pass", "ok \x1b[1;32mPASS\x1b[0m\tdone\r\n", "ok \x1b[1;32mPASS\x1b[0m\tdone\r\n"},
		{"OSC 52 clipboard write", "a\x1b]52;c;ZWNobyBwd25lZA==\x07b", "ab"},
		{"OSC title ended by ST", "a\x1b]0;evil title\x1b\\b", "ab"},
		{"clear screen and cursor moves", "x\x1b[2J\x1b[H\x1b[3Ay", "xy"},
		{"device status query", "\x1b[6n\x1b[cq", "q"},
		{"terminal reset", "a\x1bcb", "ab"},
		{"DCS string", "a\x1bPq#0;2;0;0;0\x1b\\b", "ab"},
		{"C1 CSI in UTF-8", "a\u009b2Jb é", "a2Jb é"},
		{"bell and backspace", "a\x07\x08b", "ab"},
		{"UTF-8 stays", "héllo → ✓", "héllo → ✓"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, chunk := range []int{len(c.in) + 1, 1, 3} { // whole, byte by byte, odd splits
				var buf bytes.Buffer
				ts := &terminalSafe{w: &buf}
				for i := 0; i < len(c.in); i += chunk {
					n, err := ts.Write([]byte(c.in[i:min(i+chunk, len(c.in))]))
					if err != nil || n != min(chunk, len(c.in)-i) {
						t.Fatalf("Write = %d, %v", n, err)
					}
				}
				if buf.String() != c.want {
					t.Errorf("in chunks of %d: got %q, want %q", chunk, buf.String(), c.want)
				}
			}
		})
	}
}
