package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 9, item 4: an unknown provider and provider_config problems used to
// come without file and line, and only once every other problem was fixed
// (they were found when the daemon started the provider). Now `berth run`
// lists them with the rest, each at its line.
func TestRunReportsProviderProblemsWithEveryOtherConfigProblem(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		toml string
		want []string
	}{
		{`state_dir = "` + dir + `/state"
[autoscaler]
provider = "awz"
max_instances = 0
`, []string{
			":3: autoscaler.provider = \"awz\": unknown provider \"awz\": built-in providers are [local sim]; and it is not an external plugin: provider plugin not found: no executable berth-provider-awz in",
			":4: autoscaler.max_instances = 0: must be at least 1",
		}},
		{`state_dir = "` + dir + `/state"
[autoscaler]
max_instances = -1
[autoscaler.provider_config]
netwrk = "host"
network = "bridge"
`, []string{
			":3: autoscaler.max_instances = -1: must be at least 1",
			":5: autoscaler.provider_config.netwrk: unknown key for the local provider; valid keys: network, host_paths, memory_max, cpu_max, pids_max",
			":6: autoscaler.provider_config.network: \"bridge\" is not one of isolated (the default), auto (same as isolated), host",
		}},
	} {
		file := filepath.Join(dir, "berth.toml")
		if err := os.WriteFile(file, []byte(tc.toml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errOut, err := runCLI(t, newRunCmd(), "", "--config", file)
		if err == nil {
			t.Fatalf("berth run accepted:\n%s", tc.toml)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), file+want) {
				t.Errorf("error lacks %q:\n%v%s", file+want, err, errOut)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Error("berth created its state directory although the config was refused")
	}
}
