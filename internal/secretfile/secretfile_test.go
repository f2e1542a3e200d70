package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRefusesWhatOthersMayReadOrWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o700, true}, {0o640, false}, {0o644, false}, {0o604, false}, {0o620, false}} {
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		err := Check(path, "gcp: connector.key_path", "log in to every instance")
		switch {
		case c.ok && err != nil:
			t.Errorf("mode %04o refused: %v", c.mode, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) || !strings.Contains(err.Error(), "connector.key_path")):
			t.Errorf("mode %04o: %v; want a refusal naming the file and `chmod 600 %s`", c.mode, err, path)
		}
	}
	if err := Check(filepath.Join(filepath.Dir(path), "missing"), "gcp: credentials_file", "act as the service account"); err == nil || !strings.Contains(err.Error(), "credentials_file") {
		t.Errorf("a missing file: %v; want an error naming the setting", err)
	}
}
