// Command gcpfake serves the fake Compute Engine project of package
// gcpfake as a process, for trying berth's Google Cloud provider (the
// berth-provider-gcp plugin, `berth provider test`, a whole `berth run`)
// without a Google Cloud project.
//
//	go run ./internal/gcpfake/cmd/gcpfake -dir /tmp/fake-gcp
//
// It writes the group's SSH key to DIR/key.pem, a service account key
// file whose token endpoint is the fake to DIR/service-account.json, the
// provider_config that points at the fake to DIR/provider_config.json
// (also printed, for `berth provider test --config`) and a berth.toml
// using it to DIR/berth.toml, and serves until interrupted.
//
// With -state FILE the project (its group, instances, operations, issued
// tokens, keys and address) survives a restart: run the same command
// again, after a kill -9 too, and berth's configuration stays valid.
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

	"github.com/berth-ci/berth/internal/fakehost"
	"github.com/berth-ci/berth/internal/gcpfake"
)

func main() {
	dir := flag.String("dir", "", "directory for the keys and the instances' disks (required)")
	group := flag.String("group", "berth-ci", "managed instance group name")
	project := flag.String("project", "berth-project", "project ID the fake claims")
	zone := flag.String("zone", "europe-west1-b", "zone of a zonal group")
	region := flag.String("region", "", "region of a regional group (instead of -zone)")
	maxSize := flag.Int("max-size", 10, "max_size in provider_config and max_instances in berth.toml")
	machineType := flag.String("machine-type", "e2-small", "the template's machine type (a2-highgpu-1g and m1-megamem-96 cannot suspend)")
	spot := flag.Bool("spot", false, "the template makes Spot VMs")
	boot := flag.Duration("boot-time", 2*time.Second, "how long a new or resumed instance takes to run")
	lag := flag.Duration("listing-lag", time.Second, "how long after creation an instance appears in listManagedInstances")
	stop := flag.Duration("stop-time", time.Second, "how long suspending and deleting take")
	opTime := flag.Duration("operation-time", 500*time.Millisecond, "how long an operation stays RUNNING")
	pageSize := flag.Int("page-size", 0, "most items per page (0: as asked)")
	stockout := flag.String("stockout", "", "fail every instance creation with this code (QUOTA_EXCEEDED, ZONE_RESOURCE_POOL_EXHAUSTED): resizes end DONE, the members are listed CREATING with no id and the error in lastAttempt")
	stockoutFor := flag.Duration("stockout-for", 0, "end the -stockout after this long (0: never)")
	creationLag := flag.Duration("creation-lag", 0, "how long a new instance is listed CREATING with no id before it exists")
	state := flag.String("state", "", "keep the project in this file across restarts (written atomically on every change, read at start)")
	addr := flag.String("addr", "", "the API's listen address (default: the one -state saved, else a free loopback port)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("gcpfake: -dir is required")
	}
	if err := os.MkdirAll(filepath.Join(*dir, "instances"), 0o700); err != nil {
		log.Fatal(err)
	}
	keyPath := filepath.Join(*dir, "key.pem")
	// A restart with -state keeps the group's key: berth holds it.
	authorized := ""
	if _, err := os.Stat(*state); *state == "" || err != nil {
		if authorized, err = fakehost.WriteKeyPair(keyPath, "gcpfake group key"); err != nil {
			log.Fatal(err)
		}
	}
	if *region != "" {
		*zone = ""
	}
	cloud, err := gcpfake.New(gcpfake.Options{Project: *project, Zone: *zone, Region: *region, Group: *group,
		AuthorizedKey: authorized, MachineType: *machineType, Spot: *spot, BootTime: *boot, ListingLag: *lag,
		StopTime: *stop, OperationTime: *opTime, PageSize: *pageSize, CreationLag: *creationLag, Stockout: *stockout, Dir: filepath.Join(*dir, "instances"),
		State: *state, Addr: *addr})
	if err != nil {
		log.Fatal(err)
	}
	saPath := filepath.Join(*dir, "service-account.json")
	if err := os.WriteFile(saPath, cloud.ServiceAccountKey(), 0o600); err != nil {
		cloud.Close()
		log.Fatal(err)
	}
	pc := map[string]any{
		"name": *group, "project": *project, "endpoint": cloud.URL(), "credentials_file": saPath,
		"ssh_port": cloud.SSHPort(), "max_size": *maxSize, "suspend": true,
		"connector": map[string]any{"username": "berth", "key_path": keyPath},
	}
	if *region != "" {
		pc["region"] = *region
	} else {
		pc["zone"] = *zone
	}
	cfg, _ := json.Marshal(pc)
	if err := fakehost.WriteConfigs(*dir, "# berth on the fake Compute Engine project of gcpfake (internal/gcpfake/cmd/gcpfake).\n"+
		"# Run: berth run --config "+filepath.Join(*dir, "berth.toml")+"\n", "gcp", cfg, pc, *maxSize); err != nil {
		cloud.Close()
		log.Fatal(err)
	}
	fmt.Printf("%s\n", cfg)
	if *stockout != "" {
		if *stockoutFor > 0 {
			time.AfterFunc(*stockoutFor, func() { cloud.Stockout("") })
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	cloud.Close()
}
