package local

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"

	"golang.org/x/crypto/ssh"
)

// newKeyPEM makes an SSH key (a sandbox's host key, the group's client key)
// in OpenSSH's PEM format.
//
// ECDSA P-256, not Ed25519: each sandbox is a new process that signs once
// with its host key and checks the client's signature once, and Go's
// Ed25519 builds its base-point tables on a process's first signature and
// first verification (about 9 % of a sandbox's CPU until its first command,
// measured with perf), where P-256's tables are compiled into the binary
// (amd64, arm64). A group's existing client key is kept whatever its type.
func newKeyPEM(comment string) ([]byte, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	blk, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(blk), nil
}
