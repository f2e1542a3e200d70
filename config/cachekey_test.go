package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The S3 secret key can be kept out of berth.toml in a file of its own, as
// a GitLab token can: read with its surrounding space trimmed, refused when
// other users may read it, when empty, or beside secret_key.
func TestCacheSecretKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	write("s3-key", "wJalrXUtnFEMI\n", 0o600)
	write("s3-key-open", "wJalrXUtnFEMI\n", 0o644)
	write("s3-key-empty", "\n", 0o600)
	const head = "[cache]\ns3_endpoint = \"127.0.0.1:9000\"\nbucket = \"b\"\naccess_key = \"AKIA\"\n"

	for _, lines := range []string{"secret_key_file = \"s3-key\"\n", "secret_key = \"\"\nsecret_key_file = \"s3-key\"\n"} {
		c, err := Parse([]byte(head+lines), filepath.Join(dir, "berth.toml"))
		if err != nil || c.Cache.SecretKey != "wJalrXUtnFEMI" {
			t.Fatalf("%s: key %q, %v; want the file's key, trimmed", lines, c.Cache.SecretKey, err)
		}
	}
	for _, tt := range []struct{ name, line, want string }{
		{"readable by others", "secret_key_file = \"s3-key-open\"\n", "chmod 600"},
		{"empty", "secret_key_file = \"s3-key-empty\"\n", "the file is empty"},
		{"missing", "secret_key_file = \"no-such-key\"\n", "no such file"},
		{"both", "secret_key = \"x\"\nsecret_key_file = \"s3-key\"\n", "not both"},
	} {
		_, err := Parse([]byte(head+tt.line), filepath.Join(dir, "berth.toml"))
		if err == nil || !strings.Contains(err.Error(), "cache.secret_key_file") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want an error on cache.secret_key_file saying %q", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "wJalrXUtnFEMI") {
			t.Errorf("%s: the error shows the key: %v", tt.name, err)
		}
	}
}
