package fakehost

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"golang.org/x/crypto/ssh"
)

// WriteConfigs writes what a fake's command leaves in dir for its user:
// the provider_config for `berth provider test --config`
// (DIR/provider_config.json, js) and a berth.toml that runs berth on the
// fake with provider and max_instances (DIR/berth.toml), so nobody
// translates JSON to TOML by hand. header is the TOML file's opening
// comment. The TOML file is written last: its presence says the fake
// serves.
func WriteConfigs(dir, header, provider string, js []byte, pc map[string]any, maxSize int) error {
	if err := os.WriteFile(filepath.Join(dir, "provider_config.json"), append(js, '\n'), 0o600); err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("state_dir = " + strconv.Quote(filepath.Join(dir, "berth-state")) + "\n\n")
	doc := map[string]any{"autoscaler": map[string]any{"provider": provider, "max_instances": maxSize, "provider_config": pc}}
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "berth.toml"), b.Bytes(), 0o600)
}

// WriteKeyPair writes a new ed25519 private key to path (the login key the
// fake's instances accept) and returns its public half in authorized_keys
// form.
func WriteKeyPair(path, comment string) (string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", err
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))), nil
}
