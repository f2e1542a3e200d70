package config

import "testing"

func TestMaxArtifactSize(t *testing.T) {
	const gitlab = "[[source]]\nkind = \"gitlab\"\nurl = \"https://gitlab.com\"\ntoken = \"t\"\n" // lines 1-4
	c, err := Parse([]byte(gitlab+"max_artifact_size = \"1GiB\"\n"), "berth.toml")
	if err != nil || c.Sources[0].MaxArtifactSize != 1<<30 {
		t.Fatalf("source %+v, err %v", c.Sources, err)
	}
	if c, err := Parse([]byte(gitlab), "berth.toml"); err != nil || c.Sources[0].MaxArtifactSize != 0 {
		t.Errorf("default: %+v %v", c.Sources, err)
	}
	wantIssue(t, gitlab+"max_artifact_size = \"lots\"\n", "source[0].max_artifact_size", 5, `a size such as "20GiB"`)
	wantIssue(t, "[[source]]\nmax_artifact_size = \"1GiB\"\n", "source[0].max_artifact_size", 2, `only valid for kind = "gitlab"`)
}
