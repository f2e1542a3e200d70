package gcpfake

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
)

// ServiceAccountKey returns a service account key file, as the Cloud
// console downloads one, whose token_uri is the fake's own token endpoint:
// the client library signs a JWT with its private key and trades it there
// for an access token, which the Compute API then requires.
func (c *Cloud) ServiceAccountKey() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(c.saKey)
	if err != nil {
		panic(err) // an RSA key always marshals
	}
	b, _ := json.MarshalIndent(map[string]string{
		"type": "service_account", "project_id": c.opts.Project, "private_key_id": "0123456789abcdef",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "berth@" + c.opts.Project + ".iam.gserviceaccount.com", "client_id": "100000000000000000001",
		"auth_uri": c.URL() + "/auth", "token_uri": c.URL() + "/token", "universe_domain": "googleapis.com",
	}, "", "  ")
	return b
}

// serveToken is the OAuth 2.0 token endpoint for the JWT bearer grant
// (RFC 7523): the assertion must be an RS256 JWT signed by the service
// account's key.
func (c *Cloud) serveToken(w http.ResponseWriter, r *http.Request) {
	oauthErr := func(code, desc string) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		oauthErr("invalid_request", "want a POST with a form body")
		return
	}
	if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		oauthErr("unsupported_grant_type", "Invalid grant_type: "+r.PostForm.Get("grant_type"))
		return
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		oauthErr("invalid_grant", "Invalid JWT: not three parts")
		return
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err != nil || rsa.VerifyPKCS1v15(&c.saKey.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		oauthErr("invalid_grant", "Invalid JWT Signature.")
		return
	}
	tok := "ya29.fake-" + randomHex(16)
	c.mu.Lock()
	c.tokens[tok] = true
	c.calls["token"]++
	c.saveLocked()
	c.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3599})
}
