package local

import "testing"

func TestPidMaxAdvice(t *testing.T) {
	for _, c := range []struct {
		pidMax, fits int
		warn         bool
	}{
		{32768, 2048, true},      // the kernel's default: about 2,000 sandboxes
		{4194304, 262144, false}, // systemd's default
		{160000, 10000, false},
	} {
		fits, warn := pidMaxAdvice(c.pidMax)
		if fits != c.fits || warn != c.warn {
			t.Errorf("pid_max %d: fits %d warn %v, want %d %v", c.pidMax, fits, warn, c.fits, c.warn)
		}
	}
}
