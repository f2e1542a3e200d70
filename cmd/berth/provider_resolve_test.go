package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `berth provider test NAME` finds the provider as `provider = NAME` does:
// docs/aws.md runs `berth provider test berth-provider-aws` for a plugin on
// PATH, which used to be read as a file in the current directory.
func TestProviderTestResolvesNamesLikeTheConfig(t *testing.T) {
	sim := pluginBin(t, "cmd/berth-provider-sim", "berth-provider-sim")
	dir := t.TempDir()
	data, err := os.ReadFile(sim)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "berth-provider-fakecloud"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"fakecloud", "berth-provider-fakecloud"} {
		out, code := providerTest(t, "--skip-ssh", "--plugin-dir", dir, arg)
		want := "conformance suite for provider plugin fakecloud (" + filepath.Join(dir, "berth-provider-fakecloud") + ")"
		if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "OK: the plugin conforms") {
			t.Errorf("provider test %s: exit %d, want %q in\n%s", arg, code, want, out)
		}
	}
	// On $PATH, as docs/aws.md has it.
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, code := providerTest(t, "--skip-ssh", "berth-provider-fakecloud"); code != 0 || !strings.Contains(out, "provider plugin fakecloud") {
		t.Errorf("plugin on PATH: exit %d\n%s", code, out)
	}

	// A built-in name tests the built-in provider, as provider = "local" runs it.
	if out, code := providerTest(t, "local"); code != 0 || !strings.Contains(out, "conformance suite for built-in provider local") ||
		!strings.Contains(out, "PASS  SSH") {
		t.Errorf("provider test local: exit %d\n%s", code, out)
	}

	// Unknown: where it looked, and the ./ spelling for a file in the
	// current directory.
	cwd := t.TempDir()
	os.WriteFile(filepath.Join(cwd, "myplugin"), data, 0o755)
	cmd := exec.Command(berthBin, "provider", "test", "--plugin-dir", dir, "myplugin")
	cmd.Dir = cwd
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no executable berth-provider-myplugin in "+dir) ||
		!strings.Contains(string(out), "write ./myplugin") {
		t.Errorf("unknown name: %v\n%s", err, out)
	}
	cmd = exec.Command(berthBin, "provider", "test", "--skip-ssh", "./myplugin")
	cmd.Dir = cwd
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "provider plugin myplugin") {
		t.Errorf("./myplugin: %v\n%s", err, out)
	}
}
