package local

import "testing"

func TestPidMaxAdvice(t *testing.T) {
	for _, c := range []struct {
		pidMax, fits int
		warn         bool
	}{
		{32768, 2730, true},      // the kernel's default: under 3,000 sandboxes
		{4194304, 349525, false}, // systemd's default
		{120000, 10000, false},
		{119999, 9999, true},
	} {
		fits, warn := pidMaxAdvice(c.pidMax)
		if fits != c.fits || warn != c.warn {
			t.Errorf("pid_max %d: fits %d warn %v, want %d %v", c.pidMax, fits, warn, c.fits, c.warn)
		}
	}
}
