// Command azurefake serves the fake Azure subscription of package
// azurefake as a process, for trying berth's Azure provider (the
// berth-provider-azure plugin, `berth provider test`, a whole `berth run`)
// without an Azure account.
//
//	go run ./internal/azurefake/cmd/azurefake -dir /tmp/fake-azure
//
// It writes the scale set's SSH key to DIR/key.pem, the fake's TLS
// certificate to DIR/ca.pem, the service principal's environment to
// DIR/azure.env (source it: azidentity's default chain reads
// AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET), the
// provider_config that points at the fake to DIR/provider_config.json
// (also printed, for `berth provider test --config`) and a berth.toml using
// it to DIR/berth.toml, and serves until interrupted. With -state FILE the
// subscription (the set, its instances, the endpoint's address, the login
// key) survives a restart, so a chaos test can restart the cloud too.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/berth-ci/berth/internal/azurefake"
	"github.com/berth-ci/berth/internal/fakehost"
	"golang.org/x/crypto/ssh"
)

func main() {
	dir := flag.String("dir", "", "directory for the key, the certificate and the instances' disks (required)")
	set := flag.String("scale-set", "berth-ci", "scale set name")
	group := flag.String("resource-group", "berth", "resource group")
	location := flag.String("location", "westeurope", "region the fake claims")
	maxSize := flag.Int("max-size", 10, "max_size in the provider_config, and berth's max_instances")
	spot := flag.Bool("spot", false, "Spot priority instances (eviction policy Delete)")
	boot := flag.Duration("boot-time", 2*time.Second, "how long a new instance stays creating")
	start := flag.Duration("start-time", time.Second, "how long a started instance stays starting")
	dealloc := flag.Duration("deallocate-time", time.Second, "how long an instance stays deallocating")
	del := flag.Duration("delete-time", time.Second, "how long an instance stays deleting")
	lag := flag.Duration("listing-lag", time.Second, "how long after launch an instance appears in listings")
	poll := flag.Duration("poll-interval", time.Second, "Retry-After of long-running operations")
	overprovision := flag.Bool("overprovision", false, "create the set overprovisioned (Azure's default; berth refuses it, docs/azure.md)")
	allocFail := flag.String("allocation-failure", "", "fail every new instance's allocation with this code (AllocationFailed), keeping it in the set, Failed")
	coreQuota := flag.Int("core-quota", 0, "the region's vCPU quota; a scale-out beyond it is refused with 409 OperationNotAllowed (0: none)")
	state := flag.String("state", "", "keep the subscription in this file across restarts (written atomically on change, read at start)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("azurefake: -dir is required")
	}
	if err := os.MkdirAll(filepath.Join(*dir, "instances"), 0o700); err != nil {
		log.Fatal(err)
	}
	keyPath := filepath.Join(*dir, "key.pem")
	authorized, err := loginKey(keyPath, *state != "")
	if err != nil {
		log.Fatal(err)
	}
	cloud, err := azurefake.New(azurefake.Options{ScaleSet: *set, ResourceGroup: *group, Location: *location, Spot: *spot,
		AuthorizedKey: authorized, BootTime: *boot, StartTime: *start, DeallocateTime: *dealloc, DeleteTime: *del,
		ListingLag: *lag, PollInterval: *poll, Dir: filepath.Join(*dir, "instances"),
		NoOverprovision: !*overprovision, AllocationFailure: *allocFail, CoreQuota: *coreQuota, StateFile: *state})
	if err != nil {
		log.Fatal(err)
	}
	o := cloud.Options()
	caPath := filepath.Join(*dir, "ca.pem")
	env := fmt.Sprintf("export AZURE_TENANT_ID=%s AZURE_CLIENT_ID=%s AZURE_CLIENT_SECRET=%s\n", o.TenantID, o.ClientID, o.ClientSecret)
	if err := os.WriteFile(caPath, cloud.CACertPEM(), 0o600); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*dir, "azure.env"), []byte(env), 0o600); err != nil {
		log.Fatal(err)
	}
	pc := map[string]any{
		"subscription_id": o.Subscription, "resource_group": o.ResourceGroup, "name": o.ScaleSet,
		"endpoint": cloud.URL(), "authority_host": cloud.URL(), "ca_file": caPath,
		"ssh_port": cloud.SSHPort(), "suspend": true, "max_size": *maxSize,
		"connector": map[string]any{"key_path": keyPath},
	}
	cfg, _ := json.Marshal(pc)
	if err := fakehost.WriteConfigs(*dir, "# berth on the fake Azure subscription of azurefake (internal/azurefake/cmd/azurefake).\n"+
		"# Run: . "+filepath.Join(*dir, "azure.env")+"; berth run --config "+filepath.Join(*dir, "berth.toml")+"\n", "azure", cfg, pc, *maxSize); err != nil {
		cloud.Close()
		log.Fatal(err)
	}
	fmt.Printf("%s\n", cfg)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	cloud.Close()
}

// loginKey writes a new login key to path, or, when the subscription is
// kept in a state file, reuses the one there: the set's OS profile keeps
// its key across a restart.
func loginKey(path string, keep bool) (string, error) {
	if keep {
		if pem, err := os.ReadFile(path); err == nil {
			signer, err := ssh.ParsePrivateKey(pem)
			if err != nil {
				return "", fmt.Errorf("azurefake: %s: %w", path, err)
			}
			return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), nil
		}
	}
	return fakehost.WriteKeyPair(path, "azurefake scale set key")
}
