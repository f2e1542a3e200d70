package aws

import (
	"bufio"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Markers cloud-init's write-ssh-key-fingerprints module prints to the
// console at the end of the first boot. The fingerprint lines carry a
// syslog-style prefix ("ec2: "); the key lines do not, but we accept
// either.
const (
	beginFingerprints = "-----BEGIN SSH HOST KEY FINGERPRINTS-----"
	endFingerprints   = "-----END SSH HOST KEY FINGERPRINTS-----"
	beginKeys         = "-----BEGIN SSH HOST KEY KEYS-----"
	endKeys           = "-----END SSH HOST KEY KEYS-----"
)

var (
	fingerprintRE = regexp.MustCompile(`SHA256:[A-Za-z0-9+/]+=*`)
	keyRE         = regexp.MustCompile(`(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) [A-Za-z0-9+/]+=*`)
)

// consoleHostKeys is what an instance's console output says about its SSH
// host keys.
type consoleHostKeys struct {
	// Keys are the host public keys, authorized_keys format, best first
	// (ed25519, then ECDSA, then RSA).
	Keys []string
	// Fingerprints are SHA256 fingerprints ("SHA256:...").
	Fingerprints []string
}

// parseConsole extracts the host key blocks from console output. Keys
// whose fingerprint is not in the fingerprint block (when there is one)
// are dropped: both blocks come from the same boot, so a mismatch means
// the output is not what cloud-init wrote.
func parseConsole(out string) consoleHostKeys {
	var res consoleHostKeys
	var keys []ssh.PublicKey
	section := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.Contains(line, beginFingerprints):
			section = "fp"
			continue
		case strings.Contains(line, beginKeys):
			section = "keys"
			continue
		case strings.Contains(line, endFingerprints), strings.Contains(line, endKeys):
			section = ""
			continue
		}
		switch section {
		case "fp":
			if fp := fingerprintRE.FindString(line); fp != "" {
				res.Fingerprints = append(res.Fingerprints, fp)
			}
		case "keys":
			if m := keyRE.FindString(line); m != "" {
				if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(m)); err == nil {
					keys = append(keys, k)
				}
			}
		}
	}
	rank := func(t string) int {
		switch {
		case t == ssh.KeyAlgoED25519:
			return 0
		case strings.HasPrefix(t, "ecdsa-"):
			return 1
		}
		return 2
	}
	for r := 0; r <= 2; r++ {
		for _, k := range keys {
			if rank(k.Type()) != r {
				continue
			}
			if len(res.Fingerprints) > 0 && !slices.Contains(res.Fingerprints, ssh.FingerprintSHA256(k)) {
				continue
			}
			res.Keys = append(res.Keys, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))))
		}
	}
	return res
}
