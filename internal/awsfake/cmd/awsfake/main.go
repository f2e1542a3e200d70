// Command awsfake serves the fake AWS region of package awsfake as a
// process, for trying berth's AWS provider (the berth-provider-aws plugin,
// `berth provider test`, a whole `berth run`) without an AWS account.
//
//	go run ./internal/awsfake/cmd/awsfake -dir /tmp/fake-aws
//
// It writes the group's key pair to DIR/key.pem, the provider_config that
// points at the fake to DIR/provider_config.json (also printed, for
// `berth provider test --config`) and a berth.toml using it to
// DIR/berth.toml, and serves until interrupted. The
// provider needs credentials of any value, e.g. AWS_ACCESS_KEY_ID=x
// AWS_SECRET_ACCESS_KEY=x; the fake checks only that requests are signed.
//
// With -state FILE the region (its group, instances, key pair and
// address) survives a restart: run the same command again, after a
// kill -9 too, and berth's configuration stays valid.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/internal/fakehost"
)

func main() {
	dir := flag.String("dir", "", "directory for the key pair and the instances' disks (required)")
	group := flag.String("group", "berth-ci", "Auto Scaling group name")
	region := flag.String("region", "eu-west-1", "region the fake claims")
	maxSize := flag.Int("max-size", 10, "the group's MaxSize")
	minSize := flag.Int("min-size", 0, "the group's MinSize")
	boot := flag.Duration("boot-time", 2*time.Second, "how long an instance stays pending")
	lag := flag.Duration("listing-lag", time.Second, "how long after launch an instance appears in listings")
	stop := flag.Duration("stop-time", time.Second, "how long an instance stays stopping")
	term := flag.Duration("terminate-time", time.Second, "how long an instance stays shutting-down")
	lifecycle := flag.Duration("lifecycle-time", time.Second, "how long standby moves take")
	pageSize := flag.Int("page-size", 0, "most items per page (0: as asked)")
	console := flag.String("console", "keys", "what console output shows: keys, fingerprints or none")
	state := flag.String("state", "", "keep the region in this file across restarts (written atomically on every change, read at start)")
	addr := flag.String("addr", "", "the API's listen address (default: the one -state saved, else a free loopback port)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("awsfake: -dir is required")
	}
	formats := map[string]awsfake.ConsoleFormat{"keys": awsfake.ConsoleKeys, "fingerprints": awsfake.ConsoleFingerprints, "none": awsfake.ConsoleEmpty}
	format, ok := formats[*console]
	if !ok {
		log.Fatalf("awsfake: -console %q: want keys, fingerprints or none", *console)
	}
	if err := os.MkdirAll(filepath.Join(*dir, "instances"), 0o700); err != nil {
		log.Fatal(err)
	}
	keyPath := filepath.Join(*dir, "key.pem")
	// A restart with -state keeps the key pair: berth holds it.
	authorized := ""
	if _, err := os.Stat(*state); *state == "" || err != nil {
		if authorized, err = fakehost.WriteKeyPair(keyPath, "awsfake key pair"); err != nil {
			log.Fatal(err)
		}
	}
	cloud, err := awsfake.New(awsfake.Options{Region: *region, Group: *group, MinSize: *minSize, MaxSize: *maxSize,
		AuthorizedKey: authorized, BootTime: *boot, ListingLag: *lag, StopTime: *stop, TerminateTime: *term,
		LifecycleTime: *lifecycle, PageSize: *pageSize, Console: format, Dir: filepath.Join(*dir, "instances"),
		State: *state, Addr: *addr})
	if err != nil {
		log.Fatal(err)
	}
	pc := map[string]any{
		"name": *group, "region": *region, "endpoint": cloud.URL(), "ssh_port": cloud.SSHPort(), "suspend": true,
		"connector": map[string]any{"username": "ec2-user", "key_path": keyPath},
	}
	cfg, _ := json.Marshal(pc)
	if err := fakehost.WriteConfigs(*dir, "# berth on the fake AWS region of awsfake (internal/awsfake/cmd/awsfake).\n"+
		"# Run: AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x berth run --config "+filepath.Join(*dir, "berth.toml")+"\n", "aws", cfg, pc, *maxSize); err != nil {
		cloud.Close()
		log.Fatal(err)
	}
	fmt.Printf("%s\n", cfg)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	cloud.Close()
}
