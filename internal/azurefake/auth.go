package azurefake

import (
	"net/http"
	"time"

	"golang.org/x/crypto/ssh"
)

// tokenLifetime is how long an access token is valid; Entra ID issues
// tokens for 60 to 90 minutes.
const tokenLifetime = time.Hour

// serveToken is Entra ID's v2.0 token endpoint for the client-credentials
// grant (what azidentity's EnvironmentCredential and
// ClientSecretCredential use): the one service principal of Options, any
// scope.
func (c *Cloud) serveToken(w http.ResponseWriter, r *http.Request, tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.changedLocked()
	c.calls["Token"]++
	oauthErr := func(status int, code, desc string) {
		writeJSON(w, status, map[string]any{"error": code, "error_description": desc})
	}
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		oauthErr(http.StatusBadRequest, "invalid_request", "AADSTS900144: The request body must contain the following parameter: 'grant_type'.")
		return
	}
	f := r.PostForm
	switch {
	case tenant != c.opts.TenantID:
		oauthErr(http.StatusBadRequest, "invalid_request", "AADSTS90002: Tenant '"+tenant+"' not found.")
	case f.Get("grant_type") != "client_credentials":
		oauthErr(http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type '"+f.Get("grant_type")+"'.")
	case f.Get("client_id") != c.opts.ClientID:
		oauthErr(http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application with identifier '"+f.Get("client_id")+"' was not found in the directory.")
	case f.Get("client_secret") != c.opts.ClientSecret:
		oauthErr(http.StatusUnauthorized, "invalid_client", "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.")
	default:
		tok := randomHex(32)
		c.tokens[tok] = time.Now().Add(tokenLifetime)
		writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": int(tokenLifetime.Seconds()),
			"ext_expires_in": int(tokenLifetime.Seconds()), "access_token": tok})
	}
}

// serveOpenIDConfig is the tenant's OpenID Connect discovery document,
// which MSAL reads before asking for a token.
func (c *Cloud) serveOpenIDConfig(w http.ResponseWriter, r *http.Request, tenant string) {
	base := c.srv.URL + "/" + tenant
	writeJSON(w, http.StatusOK, map[string]any{
		"token_endpoint":                        base + "/oauth2/v2.0/token",
		"authorization_endpoint":                base + "/oauth2/v2.0/authorize",
		"issuer":                                base + "/v2.0",
		"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"},
		"response_types_supported":              []string{"code", "id_token", "code id_token", "id_token token"},
		"tenant_region_scope":                   "EU",
	})
}

func fingerprint(authorizedKey string) string {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorizedKey))
	if err != nil {
		return "?"
	}
	return ssh.FingerprintSHA256(k)
}
