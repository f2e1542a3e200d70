package runnerimport_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/config/runnerimport"
	"github.com/berth-ci/berth/provider/aws"
	"github.com/berth-ci/berth/provider/azure"
	"github.com/berth-ci/berth/provider/gcp"
)

// TestImport imports gitlab-runner config files (testdata/gitlab, written
// from GitLab's documented examples, or the command's input) and shows the
// berth.toml, the notes, and what berth's own checks say of the result:
// config.Parse for the file, the cloud provider's ParseConfig for
// provider_config, as the plugin checks it.
//
//	import file=NAME [runner=NAME]   or   import  with the file as input
func TestImport(t *testing.T) {
	datadriven.RunTest(t, "testdata/import.txt", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "import" {
			d.Fatalf(t, "unknown command %s", d.Cmd)
		}
		var file, runner string
		d.MaybeScanArgs(t, "file", &file)
		d.MaybeScanArgs(t, "runner", &runner)
		src, name := []byte(d.Input), "config.toml"
		if file != "" {
			var err error
			if src, err = os.ReadFile(filepath.Join("testdata/gitlab", file)); err != nil {
				d.Fatalf(t, "%v", err)
			}
			name = file
		}
		dir := t.TempDir()
		res, err := runnerimport.Import(src, name, runnerimport.Options{Runner: runner, TokenDir: dir})
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var out strings.Builder
		out.WriteString(res.TOML)
		out.WriteString("---- tokens\n")
		for _, tf := range res.Tokens {
			if strings.Contains(res.TOML, tf.Token) {
				t.Errorf("the token of runner %q is in the output", tf.Runner)
			}
			if err := os.WriteFile(tf.Path, []byte(tf.Token+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out.WriteString(tf.Runner + ": " + tf.Path + "\n")
		}
		for _, n := range res.Notes {
			out.WriteString("note: " + n + "\n")
		}
		out.WriteString("---- check\n" + check(res.TOML, dir))
		return strings.ReplaceAll(out.String(), dir, "$TOKENS")
	})
}

// check is `berth config check` on the imported file with the cloud
// plugins present: the plugins check provider_config with ParseConfig.
func check(berthTOML, dir string) string {
	path := filepath.Join(dir, "berth.toml")
	cfg, err := config.Parse([]byte(berthTOML), path)
	if err != nil {
		return err.Error() + "\n"
	}
	a := cfg.Autoscaler
	switch a.Provider {
	case "aws":
		_, err = aws.ParseConfig(a.ProviderConfig)
	case "gcp":
		_, err = gcp.ParseConfig(a.ProviderConfig)
	case "azure":
		_, err = azure.ParseConfig(a.ProviderConfig)
	case "local", "sim":
	default:
		err = errors.New("no such provider: " + a.Provider)
	}
	if err != nil {
		return "provider_config: " + err.Error() + "\n"
	}
	var w strings.Builder
	for _, is := range cfg.Warnings {
		w.WriteString("warning: " + is.String() + "\n")
	}
	return w.String() + "OK\n"
}
