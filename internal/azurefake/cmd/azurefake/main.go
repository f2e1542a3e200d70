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
// it to DIR/berth.toml, and serves until interrupted.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/internal/azurefake"
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
	flag.Parse()
	if *dir == "" {
		log.Fatal("azurefake: -dir is required")
	}
	if err := os.MkdirAll(filepath.Join(*dir, "instances"), 0o700); err != nil {
		log.Fatal(err)
	}
	keyPath := filepath.Join(*dir, "key.pem")
	authorized, err := writeKeyPair(keyPath)
	if err != nil {
		log.Fatal(err)
	}
	cloud, err := azurefake.New(azurefake.Options{ScaleSet: *set, ResourceGroup: *group, Location: *location, Spot: *spot,
		AuthorizedKey: authorized, BootTime: *boot, StartTime: *start, DeallocateTime: *dealloc, DeleteTime: *del,
		ListingLag: *lag, PollInterval: *poll, Dir: filepath.Join(*dir, "instances")})
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
	if err := writeConfigs(*dir, cfg, pc, *maxSize); err != nil {
		cloud.Close()
		log.Fatal(err)
	}
	fmt.Printf("%s\n", cfg)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	cloud.Close()
}

// writeConfigs writes the provider_config for `berth provider test
// --config` (DIR/provider_config.json) and a berth.toml that runs berth on
// the fake (DIR/berth.toml), so nobody translates JSON to TOML by hand.
// The TOML file is written last: its presence says the fake serves.
func writeConfigs(dir string, js []byte, pc map[string]any, maxSize int) error {
	if err := os.WriteFile(filepath.Join(dir, "provider_config.json"), append(js, '\n'), 0o600); err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString("# berth on the fake Azure subscription of azurefake (internal/azurefake/cmd/azurefake).\n" +
		"# Run: . " + filepath.Join(dir, "azure.env") + "; berth run --config " + filepath.Join(dir, "berth.toml") + "\n")
	b.WriteString("state_dir = " + strconv.Quote(filepath.Join(dir, "berth-state")) + "\n\n")
	doc := map[string]any{"autoscaler": map[string]any{"provider": "azure", "max_instances": maxSize, "provider_config": pc}}
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "berth.toml"), b.Bytes(), 0o600)
}

func writeKeyPair(path string) (string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "azurefake scale set key")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", err
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))), nil
}
