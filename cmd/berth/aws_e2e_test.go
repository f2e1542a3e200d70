package main

// End-to-end test of the AWS provider plugin: the real berth binary runs
// jobs through berth-provider-aws against the fake AWS region of package
// internal/awsfake, whose instances are real SSH hosts on this machine.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/internal/fakehost"
)

// awsFake starts a fake AWS region and returns it, the directory holding
// its instances' homes, and the [autoscaler] table that runs berth on its
// group through the plugin binary with max_instances max. The plugin's SDK
// finds static credentials in the environment, as a CI job's would.
func awsFake(t *testing.T, opts awsfake.Options, max int) (*awsfake.Cloud, string, string) {
	t.Helper()
	bin := pluginBin(t, "cmd/berth-provider-aws", "berth-provider-aws")
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "key.pem")
	pub, err := fakehost.WriteKeyPair(keyPath, "")
	if err != nil {
		t.Fatal(err)
	}
	opts.AuthorizedKey = pub
	opts.Dir = filepath.Join(dir, "instances")
	cloud, err := awsfake.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cloud.Close)
	awsfake.StaticCredentials(t)
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	err = enc.Encode(map[string]any{"autoscaler": map[string]any{
		"provider_path": bin, "max_instances": max,
		"provider_config": map[string]any{"name": "berth-ci", "region": cloud.Region(), "endpoint": cloud.URL(),
			"ssh_port": cloud.SSHPort(), "connector": map[string]any{"username": "ec2-user", "key_path": keyPath}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return cloud, opts.Dir, b.String()
}

// An instance of the group that berth has no record of (a previous
// process's whose store is lost, or one started by hand) is running when
// berth starts, with an old job's file in its home. The plugin cannot reset
// it, and a cloud's instances are disposable, so berth deletes it and boots
// a fresh one for the job (max_instances = 1): the job never lands on it.
// Before issue 32 it was adopted as it was, and the job read the file.
func TestAWSInstanceFoundRunningIsReplacedNotGivenAJob(t *testing.T) {
	cloud, homes, cfg := awsFake(t, awsfake.Options{MaxSize: 2, BootTime: 300 * time.Millisecond,
		ListingLag: 300 * time.Millisecond, TerminateTime: 300 * time.Millisecond}, 1)
	cloud.SetDesired(1)
	old := cloud.Instances()[0]
	waitFor(t, time.Minute, "the unknown instance to run", func() bool {
		in, _ := cloud.Instance(old)
		return in.State == awsfake.EC2Running
	})
	if err := os.WriteFile(filepath.Join(homes, old, "leftover"), []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	d := newDaemon(t, cfg)
	// Submit only once berth has listed it: a job booked before the first
	// listing asks for an instance, which this one would then be taken for.
	waitFor(t, time.Minute, "berth to list the instance it found", func() bool {
		for _, in := range d.instances() {
			if in.ID == old {
				return true
			}
		}
		return false
	})
	out, errOut, code := d.berth("submit", "--wait", "--", "cat $HOME/leftover 2>/dev/null || echo clean; basename $HOME")
	if code != 0 || strings.HasPrefix(out, "secret") || !strings.HasPrefix(out, "clean\n") {
		t.Fatalf("the job: exit %d, stdout %q; want it clean, on a fresh instance; stderr %s", code, out, errOut)
	}
	if on := strings.TrimSpace(strings.TrimPrefix(out, "clean\n")); on == old {
		t.Errorf("the job ran on %s, the instance berth found running", old)
	}
	if in, _ := cloud.Instance(old); in.Lifecycle != "" && in.Lifecycle != awsfake.LifecycleTerminating {
		t.Errorf("the instance berth found running is still in the group (%s, %s); want it deleted", in.Lifecycle, in.State)
	}
	if log := d.log.String(); !strings.Contains(log, "reason=replaced_unknown") || !strings.Contains(log, old) {
		t.Errorf("berth's log does not say it replaced %s (reason replaced_unknown)", old)
	}
}
