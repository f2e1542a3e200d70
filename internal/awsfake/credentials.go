package awsfake

import (
	"path/filepath"
	"testing"
)

// StaticCredentials makes the AWS SDK's default chain, in this test and in
// the processes it starts (a plugin), find static keys in the environment,
// as a CI job's would, and nothing of this machine's: no profile, shared
// files, region or instance metadata. The fake accepts any keys.
func StaticCredentials(t testing.TB) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}
