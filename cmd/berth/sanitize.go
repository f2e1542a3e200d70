package main

import "io"

// terminalSafe passes a job's output on to a terminal without the control
// sequences a job could use against the person reading it: OSC 52 (write
// the clipboard), window titles, screen clears and cursor moves that hide
// or fake lines, device queries whose answers land in the shell's input.
// Colours (SGR, ESC [ ... m), newlines, tabs and carriage returns pass;
// every other escape sequence and control character is dropped. It keeps
// its state across writes, so a sequence split between two reads is still
// recognised.
type terminalSafe struct {
	w     io.Writer
	state int
	csi   []byte // the CSI sequence being read, ESC [ included
}

const (
	tsText   = iota
	tsEsc    // after ESC
	tsCSI    // inside ESC [
	tsString // inside OSC, DCS, APC, PM or SOS: dropped up to BEL or ST
	tsStrEsc // ESC inside such a string (ST is ESC \)
	tsC2     // after 0xC2, the lead byte of the C1 controls in UTF-8
)

// maxCSI bounds a CSI sequence; longer ones are dropped.
const maxCSI = 32

func (t *terminalSafe) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p))
	for _, b := range p {
		out = t.step(out, b)
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// step handles one byte, appending what may be shown to out.
func (t *terminalSafe) step(out []byte, b byte) []byte {
	switch t.state {
	case tsEsc:
		switch b {
		case '[':
			t.state, t.csi = tsCSI, append(t.csi[:0], 0x1b, '[')
		case ']', 'P', '_', '^', 'X':
			t.state = tsString
		default:
			t.state = tsText // a two-byte sequence (ESC c resets the terminal): dropped
		}
	case tsCSI:
		t.csi = append(t.csi, b)
		switch {
		case b >= 0x40 && b <= 0x7e: // the final byte
			if b == 'm' && sgrParams(t.csi[2:len(t.csi)-1]) {
				out = append(out, t.csi...)
			}
			t.state = tsText
		case b < 0x20 || b > 0x3f || len(t.csi) > maxCSI:
			t.state = tsText
		}
	case tsString:
		switch b {
		case 0x07:
			t.state = tsText
		case 0x1b:
			t.state = tsStrEsc
		}
	case tsStrEsc:
		t.state = tsString
		if b == '\\' {
			t.state = tsText
		}
	case tsC2:
		t.state = tsText
		if b < 0x80 || b > 0x9f { // not a C1 control: the character stands
			return t.step(append(out, 0xc2), b)
		}
	default:
		switch {
		case b == 0x1b:
			t.state = tsEsc
		case b == 0xc2:
			t.state = tsC2
		case b == '\n' || b == '\t' || b == '\r':
			out = append(out, b)
		case b < 0x20 || b == 0x7f:
		default:
			out = append(out, b)
		}
	}
	return out
}

// sgrParams reports whether p holds only SGR parameters (digits and
// separators).
func sgrParams(p []byte) bool {
	for _, c := range p {
		if (c < '0' || c > '9') && c != ';' && c != ':' {
			return false
		}
	}
	return true
}
