package gitlab

import (
	"strings"

	"github.com/berth-ci/berth/jobsource"
)

// jobCredential is one entry of the job payload's credentials: GitLab sends
// the job's own registry login (gitlab-ci-token) as type "registry".
type jobCredential struct {
	Type     string `json:"type"`
	URL      string `json:"url"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// payloadImage passes the job's image, services and registry logins on.
func payloadImage(p *jobPayload) (*jobsource.Image, []jobsource.Service) {
	var im *jobsource.Image
	if p.Image != nil && p.Image.Name != "" {
		im = &jobsource.Image{Name: p.Image.Name, Entrypoint: p.Image.Entrypoint}
		for _, c := range p.Credentials {
			if c.Type == "registry" {
				im.Credentials = append(im.Credentials, jobsource.RegistryCredential{Registry: c.URL, Username: c.Username, Password: c.Password})
			}
		}
	}
	var svcs []jobsource.Service
	for _, s := range p.Services {
		// Several aliases come comma or space separated (GitLab's
		// service_multiple_aliases); the job runner takes commas.
		alias := strings.Join(strings.FieldsFunc(s.Alias, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }), ",")
		svcs = append(svcs, jobsource.Service{Name: s.Name, Alias: alias, Command: s.Command, Entrypoint: s.Entrypoint})
	}
	return im, svcs
}
