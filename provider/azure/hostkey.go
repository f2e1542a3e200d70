package azure

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"golang.org/x/crypto/ssh"
)

// Markers cloud-init's write-ssh-key-fingerprints module prints to the
// serial console at the end of the first boot; Azure's boot diagnostics
// keep that console in a blob.
const (
	beginFingerprints = "-----BEGIN SSH HOST KEY FINGERPRINTS-----"
	endFingerprints   = "-----END SSH HOST KEY FINGERPRINTS-----"
	beginKeys         = "-----BEGIN SSH HOST KEY KEYS-----"
	endKeys           = "-----END SSH HOST KEY KEYS-----"
)

// maxSerialLog bounds how much of a serial console log is read; the host
// keys are printed early in an instance's life.
const maxSerialLog = 8 << 20

var (
	fingerprintRE = regexp.MustCompile(`SHA256:[A-Za-z0-9+/]+=*`)
	keyRE         = regexp.MustCompile(`(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) [A-Za-z0-9+/]+=*`)
)

// hostKeysIn returns the host keys of a serial console log, best first
// (ed25519, ECDSA, RSA), authorized_keys format. Keys whose fingerprint is
// not in the fingerprint block (when there is one) are dropped: both
// blocks come from the same boot, so a mismatch means the log is not what
// cloud-init wrote.
func hostKeysIn(log string) []string {
	var fps []string
	var keys []ssh.PublicKey
	section := ""
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, beginFingerprints):
			section = "fp"
		case strings.Contains(line, beginKeys):
			section = "keys"
		case strings.Contains(line, endFingerprints), strings.Contains(line, endKeys):
			section = ""
		case section == "fp":
			if fp := fingerprintRE.FindString(line); fp != "" {
				fps = append(fps, fp)
			}
		case section == "keys":
			if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(keyRE.FindString(line))); err == nil {
				keys = append(keys, k)
			}
		}
	}
	rank := func(k ssh.PublicKey) int {
		switch {
		case k.Type() == ssh.KeyAlgoED25519:
			return 0
		case strings.HasPrefix(k.Type(), "ecdsa-"):
			return 1
		}
		return 2
	}
	slices.SortStableFunc(keys, func(a, b ssh.PublicKey) int { return rank(a) - rank(b) })
	var out []string
	for _, k := range keys {
		if len(fps) > 0 && !slices.Contains(fps, ssh.FingerprintSHA256(k)) {
			continue
		}
		out = append(out, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))))
	}
	return out
}

// hostKey returns the instance's host key, from the cache or its serial
// console log: RetrieveBootDiagnosticsData gives a short-lived SAS URI of
// the log blob, where cloud-init printed the host keys at the first boot.
// The console is Azure's channel, so no one on the network can forge it.
// When the log holds no keys (boot diagnostics off, cloud-init not there
// yet), the key is left empty and a warning logged: berth then trusts the
// key it first sees.
func (g *Group) hostKey(ctx context.Context, id, num, addr string) (string, error) {
	g.mu.Lock()
	k, ok := g.hostKeys[id]
	g.mu.Unlock()
	if ok {
		return k, nil
	}
	log, err := g.serialLog(ctx, id, num)
	if err != nil {
		if errors.Is(err, ErrPermission) {
			return "", err
		}
		g.log.Warn("no serial console log; host key left empty, to be trusted on first use", "id", id, "err", err)
		return "", nil
	}
	keys := hostKeysIn(log)
	if len(keys) == 0 {
		g.log.Warn("serial console log has no SSH host keys yet (cloud-init prints them late in the first boot); host key left empty, to be trusted on first use", "id", id)
		return "", nil
	}
	g.log.Info("learnt host key from the serial console log", "id", id, "addr", addr)
	g.mu.Lock()
	g.hostKeys[id] = keys[0]
	g.mu.Unlock()
	return keys[0], nil
}

// serialLog reads the instance's serial console log through boot
// diagnostics.
func (g *Group) serialLog(ctx context.Context, id, num string) (string, error) {
	resp, err := g.vms.RetrieveBootDiagnosticsData(ctx, g.cfg.ResourceGroup, g.cfg.Name, num,
		&armcompute.VirtualMachineScaleSetVMsClientRetrieveBootDiagnosticsDataOptions{SasURIExpirationTimeInMinutes: to.Ptr[int32](5)})
	if err != nil {
		return "", g.mapErr("retrieve boot diagnostics of "+id, err)
	}
	uri := deref(resp.SerialConsoleLogBlobURI, "")
	if uri == "" {
		return "", fmt.Errorf("azure: boot diagnostics of %s have no serial console log; enable boot diagnostics on the scale set", id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return "", err
	}
	r, err := g.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("azure: read serial console log of %s: %w", id, err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return "", fmt.Errorf("azure: read serial console log of %s: %s", id, r.Status)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxSerialLog))
	return string(b), err
}
