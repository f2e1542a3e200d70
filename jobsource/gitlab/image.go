package gitlab

import (
	"fmt"
	"slices"
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

// jobImage is the payload's image: its name, entrypoint and the job's
// pull_policy list (image:pull_policy), most wanted first.
type jobImage struct {
	Name       string   `json:"name"`
	Entrypoint []string `json:"entrypoint"`
	PullPolicy []string `json:"pull_policy"`
}

// pullPolicy picks the first of the job's pull policies the admin allows
// (GitLab Runner's allowed_pull_policies); "" when the job names none.
func pullPolicy(im *jobImage, allowed []string) (string, error) {
	if im == nil || len(im.PullPolicy) == 0 {
		return "", nil
	}
	for _, p := range im.PullPolicy {
		if slices.Contains(allowed, p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("pull_policy (%s) defined in the job's image: is not one of the allowed_pull_policies (%s) of this runner; "+
		"use one of those, or ask the runner's admin to allow it in [images] allowed_pull_policies",
		strings.Join(im.PullPolicy, ", "), strings.Join(allowed, ", "))
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
