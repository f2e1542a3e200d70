package diskfull

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestExplainFindsAFullDiskHoweverItIsWrapped(t *testing.T) {
	dir := t.TempDir()
	for _, err := range []error{
		&os.PathError{Op: "write", Path: dir + "/x", Err: syscall.ENOSPC},
		fmt.Errorf("back up: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}),
		fmt.Errorf("meta 0 copy: %s", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), // errno lost, as bbolt does
		errors.New("sandbox: mkdir /x: no space left on device"),                                  // from a child process
	} {
		got := Explain(dir, err)
		if got == nil || !strings.Contains(got.Error(), "the disk holding "+dir+" is full") || !strings.Contains(got.Error(), "KiB free") {
			t.Errorf("Explain(%v) = %v", err, got)
		}
	}
	if got := Explain(dir, fmt.Errorf("w: %w", syscall.EDQUOT)); got == nil || !strings.Contains(got.Error(), "no quota left") {
		t.Errorf("quota: %v", got)
	}
	for _, err := range []error{errors.New("permission denied"), syscall.EPERM} {
		if got := Explain(dir, err); got != nil {
			t.Errorf("Explain(%v) = %v, want nil: not a full disk", err, got)
		}
	}
}
