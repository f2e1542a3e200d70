package config

import (
	"crypto/x509"
	"net/url"
	"os"
	"path"
)

// checkGitLabHTTP checks the keys that say where GitLab jobs run and how
// GitLab is reached. ca_file is checked when the file is decoded
// (gitlabHTTP), so that `berth config check` finds a bad bundle rather
// than the first TLS handshake.
func checkGitLabHTTP(k *checker, p string, s Source) {
	if s.BuildsDir != "" && !path.IsAbs(s.BuildsDir) {
		k.fail(p+".builds_dir", s.BuildsDir, `must be an absolute path on the instance, e.g. "/builds"; remove it for $HOME/builds`)
	}
	if s.Proxy != "" {
		u, err := url.Parse(s.Proxy)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") || u.Host == "" {
			k.fail(p+".proxy", s.Proxy, `must be a proxy URL such as "http://proxy.example.com:3128" (http, https or socks5); remove it to use HTTPS_PROXY from the environment`)
		}
	}
}

// checkCABundle returns what is wrong with the PEM bundle at file, or "".
func checkCABundle(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return "cannot read the CA bundle: " + unwrapPathError(err).Error() + "; check the path and that berth's user may read it"
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return "holds no PEM certificate; give the CA certificate(s) that signed GitLab's certificate, in PEM (-----BEGIN CERTIFICATE-----)"
	}
	return ""
}
