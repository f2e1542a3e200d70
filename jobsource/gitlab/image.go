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
	Name         string       `json:"name"`
	Entrypoint   []string     `json:"entrypoint"`
	PullPolicy   []string     `json:"pull_policy"`
	ExecutorOpts executorOpts `json:"executor_opts"`
}

// executorOpts is image: docker: (and a service's): GitLab sends it to a
// runner that advertises image_executor_opts / service_executor_opts.
type executorOpts struct {
	Docker struct {
		User     string `json:"user"`
		Platform string `json:"platform"`
	} `json:"docker"`
}

// jobService is a services: entry of the payload.
type jobService struct {
	Name         string        `json:"name"`
	Alias        string        `json:"alias"`
	Command      []string      `json:"command"`
	Entrypoint   []string      `json:"entrypoint"`
	Variables    []jobVariable `json:"variables"`
	ExecutorOpts executorOpts  `json:"executor_opts"`
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
func payloadImage(p *jobPayload, vars jobVars) (*jobsource.Image, []jobsource.Service) {
	var im *jobsource.Image
	if p.Image != nil && p.Image.Name != "" {
		im = &jobsource.Image{Name: p.Image.Name, Entrypoint: p.Image.Entrypoint, User: p.Image.ExecutorOpts.Docker.User}
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
		svcs = append(svcs, jobsource.Service{Name: s.Name, Alias: alias, Command: s.Command, Entrypoint: s.Entrypoint,
			Variables: serviceEnv(vars, s.Variables), User: s.ExecutorOpts.Docker.User})
	}
	return im, svcs
}

// serviceEnv is a service's environment as GitLab Runner builds it
// (GetServiceVariables): the job's public and runner-set variables as the
// job sees them, then the service's own (services: variables), which win,
// expanded against all of the job's variables and the service's. File
// variables are left out: their file lies in the job's temp dir, which a
// service does not see; so are names a shell cannot hold.
func serviceEnv(job jobVars, own []jobVariable) []string {
	var env []string
	add := func(v jobVariable) {
		if validName(v.Key) && !v.File && !strings.Contains(v.Value, buildsDirMark) {
			env = append(env, v.Key+"="+v.Value)
		}
	}
	for _, v := range job {
		if v.Public {
			add(v)
		}
	}
	source := append(append(jobVars(nil), job...), own...)
	for _, v := range jobVars(own).expandWith(source) {
		add(v)
	}
	return env
}

// platformErr refuses an image: or services: docker: platform berth cannot
// run: it pulls linux/amd64 images only, so another platform would
// silently run the wrong image.
func platformErr(p *jobPayload) error {
	check := func(what, name, platform string) error {
		if platform == "" || platform == "amd64" || platform == "linux/amd64" || strings.HasPrefix(platform, "linux/amd64/") {
			return nil
		}
		return fmt.Errorf("%s %s asks for docker: platform %q, but berth runs linux/amd64 images only: "+
			"remove platform:, or set it to linux/amd64", what, name, platform)
	}
	if p.Image != nil {
		if err := check("the image", p.Image.Name, p.Image.ExecutorOpts.Docker.Platform); err != nil {
			return err
		}
	}
	for _, s := range p.Services {
		if err := check("the service", s.Name, s.ExecutorOpts.Docker.Platform); err != nil {
			return err
		}
	}
	return nil
}
