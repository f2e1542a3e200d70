package aws

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/provider"
)

func TestMapState(t *testing.T) {
	launched := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	soon, late := launched.Add(time.Minute), launched.Add(11*time.Minute)
	cases := []struct {
		lifecycle string
		ec2       ec2types.InstanceStateName
		inFlight  op
		now       time.Time
		want      provider.State
	}{
		{"Pending", "pending", opNone, soon, provider.StateCreating},
		{"Pending:Wait", "running", opNone, soon, provider.StateCreating},
		{"Pending", "pending", opNone, late, provider.StateTimeout},
		{"Pending", "", opNone, late, provider.StateTimeout},
		{"Pending", "running", opNone, late, provider.StateCreating},   // the machine runs; the group is slow
		{"Pending", "running", opResume, late, provider.StateResuming}, // leaving Standby
		{"InService", "", opNone, soon, provider.StateCreating},        // EC2 does not list it yet
		{"InService", "pending", opNone, soon, provider.StateCreating},
		{"InService", "running", opNone, late, provider.StateRunning},
		{"InService", "stopped", opNone, soon, provider.StateDeleting}, // the health check replaces it
		{"Terminating", "running", opNone, soon, provider.StateDeleting},
		{"Terminating:Wait", "running", opNone, soon, provider.StateDeleting},
		{"InService", "shutting-down", opNone, soon, provider.StateDeleting},
		{"Terminated", "terminated", opNone, soon, provider.StateDeleted},
		{"Detached", "running", opNone, soon, provider.StateDeleted},
		{"EnteringStandby", "running", opSuspend, soon, provider.StateSuspending},
		{"Standby", "running", opSuspend, soon, provider.StateSuspending},
		{"Standby", "stopping", opNone, soon, provider.StateSuspending},
		{"Standby", "stopped", opNone, late, provider.StateSuspended},
		{"Warmed:Stopped", "stopped", opNone, soon, provider.StateSuspended},
		{"Warmed:Hibernated", "stopped", opNone, soon, provider.StateSuspended},
		{"Standby", "pending", opResume, soon, provider.StateResuming},
		{"Standby", "running", opResume, soon, provider.StateResuming},
		{"Standby", "pending", opNone, soon, provider.StateResuming},
		{"InService", "running", opResume, soon, provider.StateRunning},
	}
	for _, c := range cases {
		got := mapState(c.lifecycle, c.ec2, c.inFlight, launched, c.now, 10*time.Minute)
		if got != c.want {
			t.Errorf("mapState(%s, %s, in flight %d, %v after launch) = %s, want %s", c.lifecycle, c.ec2, c.inFlight, c.now.Sub(launched), got, c.want)
		}
	}
}

// console is output as cloud-init on Amazon Linux prints it: fingerprints
// with a syslog prefix, keys without, CRLF line ends, boot noise around.
func console(fps []string, keys []ssh.PublicKey) string {
	var b strings.Builder
	b.WriteString("[    6.912233] cloud-init[1587]: Cloud-init v. 22.2.2 running 'modules:config'\r\n")
	if fps != nil {
		b.WriteString("<14>Dec  3 07:01:02 ec2: #############################################################\r\n")
		b.WriteString("<14>Dec  3 07:01:02 ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----\r\n")
		for _, fp := range fps {
			b.WriteString("<14>Dec  3 07:01:02 ec2: 256 " + fp + " root@ip-172-31-5-9.eu-west-1.compute.internal (ECDSA)\r\n")
		}
		b.WriteString("<14>Dec  3 07:01:02 ec2: -----END SSH HOST KEY FINGERPRINTS-----\r\n")
		b.WriteString("<14>Dec  3 07:01:02 ec2: #############################################################\r\n")
	}
	if keys != nil {
		b.WriteString("-----BEGIN SSH HOST KEY KEYS-----\r\n")
		for _, k := range keys {
			b.WriteString(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " root@ip-172-31-5-9.eu-west-1.compute.internal\r\n")
		}
		b.WriteString("-----END SSH HOST KEY KEYS-----\r\n")
	}
	b.WriteString("[    7.100000] cloud-init[1601]: Cloud-init v. 22.2.2 finished at Thu, 03 Dec 2026 07:01:02 +0000.\r\n")
	return b.String()
}

func hostKeys(t *testing.T) (ed, ec ssh.PublicKey) {
	t.Helper()
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if ed, err = ssh.NewPublicKey(edPub); err != nil {
		t.Fatal(err)
	}
	if ec, err = ssh.NewPublicKey(&ecPriv.PublicKey); err != nil {
		t.Fatal(err)
	}
	return ed, ec
}

func authorized(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

func TestParseConsoleBothBlocksPrefersEd25519(t *testing.T) {
	ed, ec := hostKeys(t)
	got := parseConsole(console([]string{ssh.FingerprintSHA256(ec), ssh.FingerprintSHA256(ed)}, []ssh.PublicKey{ec, ed}))
	if len(got.Keys) != 2 || got.Keys[0] != authorized(ed) || got.Keys[1] != authorized(ec) {
		t.Errorf("keys %q: want the ed25519 key, then the ECDSA one", got.Keys)
	}
	if len(got.Fingerprints) != 2 {
		t.Errorf("fingerprints %v, want 2", got.Fingerprints)
	}
}

func TestParseConsoleDropsKeysNotFingerprinted(t *testing.T) {
	ed, ec := hostKeys(t)
	got := parseConsole(console([]string{ssh.FingerprintSHA256(ec)}, []ssh.PublicKey{ed, ec}))
	if len(got.Keys) != 1 || got.Keys[0] != authorized(ec) {
		t.Errorf("keys %q: only the fingerprinted ECDSA key may be trusted", got.Keys)
	}
}

func TestParseConsoleFingerprintsOnly(t *testing.T) {
	ed, _ := hostKeys(t)
	got := parseConsole(console([]string{ssh.FingerprintSHA256(ed)}, nil))
	if len(got.Keys) != 0 || len(got.Fingerprints) != 1 || got.Fingerprints[0] != ssh.FingerprintSHA256(ed) {
		t.Errorf("got %+v, want just the fingerprint %s", got, ssh.FingerprintSHA256(ed))
	}
}

func TestParseConsoleNothing(t *testing.T) {
	got := parseConsole(console(nil, nil))
	if len(got.Keys)+len(got.Fingerprints) != 0 {
		t.Errorf("found %+v in output without host key blocks", got)
	}
}

// Console output is whatever the instance printed; parsing it must not
// panic, and every key it trusts must be a well-formed public key.
func FuzzParseConsole(f *testing.F) {
	ed, ec := func() (ssh.PublicKey, ssh.PublicKey) {
		edPub, _, _ := ed25519.GenerateKey(rand.Reader)
		ecPriv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		a, _ := ssh.NewPublicKey(edPub)
		b, _ := ssh.NewPublicKey(&ecPriv.PublicKey)
		return a, b
	}()
	f.Add(console([]string{ssh.FingerprintSHA256(ed)}, []ssh.PublicKey{ed, ec}))
	f.Add(console(nil, []ssh.PublicKey{ec}))
	f.Add("-----BEGIN SSH HOST KEY KEYS-----\nssh-rsa AAAA\n")
	f.Fuzz(func(t *testing.T, out string) {
		for _, k := range parseConsole(out).Keys {
			if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k)); err != nil {
				t.Errorf("trusted key %q does not parse: %v", k, err)
			}
		}
	})
}
