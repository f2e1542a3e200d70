package gitlab

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
)

// NewHTTPClient returns the client a source talks to GitLab with: GitLab's
// certificate is checked against the PEM bundle caFile when it is set (a
// GitLab behind a company CA), else against the system's roots; requests
// go through the proxy URL when it is set, else through HTTPS_PROXY,
// HTTP_PROXY and NO_PROXY from the environment, as gitlab-runner does.
func NewHTTPClient(caFile, proxy string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("gitlab source: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("gitlab source: ca_file %s holds no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if proxy != "" {
		u, err := url.Parse(proxy)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("gitlab source: proxy %q is not a URL such as http://proxy.example.com:3128", proxy)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	return &http.Client{Transport: tr}, nil
}
