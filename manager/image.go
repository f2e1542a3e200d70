package manager

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/images"
	"github.com/berth-ci/berth/jobroot"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/provider"
)

// runScript runs one script of a job: in the job's image through berth's
// job runner on the instance when the job names one, as a plain command
// otherwise (the after_script; the script itself starts in startScript).
func (m *Manager) runScript(ctx context.Context, ci *provider.ConnectInfo, spec *jobsource.Spec, cmd *executor.Command) (int, error) {
	if spec.Image != nil || len(spec.Services) > 0 {
		return m.runInImage(ctx, ci, spec, cmd)
	}
	return m.runner.Run(ctx, *ci, *cmd)
}

// runInImage runs one script of a job in the job's image.
func (m *Manager) runInImage(ctx context.Context, ci *provider.ConnectInfo, spec *jobsource.Spec, cmd *executor.Command) (int, error) {
	if spec.Image == nil {
		return -1, fmt.Errorf("the job names services (%s) but no image: services run only for jobs with an image", serviceNames(spec.Services))
	}
	im := m.cfg.Images
	var svcs []jobroot.Service
	for _, s := range spec.Services {
		svcs = append(svcs, jobroot.Service{Image: s.Name, Alias: s.Alias, Command: s.Command, Entrypoint: s.Entrypoint,
			Env: s.Variables, User: s.User})
	}
	var creds []images.Credential
	for _, c := range spec.Image.Credentials {
		creds = append(creds, images.Credential{Registry: c.Registry, Username: c.Username, Password: c.Password})
	}
	settings := jobroot.Settings{
		CacheDir: im.CacheDir, CacheBytes: im.CacheSize, Insecure: im.InsecureRegistries,
		Allowed: im.AllowedImages, PullPolicy: im.PullPolicy, Limits: imageLimits(im),
		ServicesTimeout: im.WaitForServicesTimeout,
	}
	if spec.Image.PullPolicy != "" {
		settings.PullPolicy = spec.Image.PullPolicy
	}
	if m.hostImages != nil {
		names := []string{spec.Image.Name}
		for _, s := range spec.Services {
			names = append(names, s.Name)
		}
		release, err := m.pullOnHost(ctx, ci.ID, names, creds, settings.PullPolicy, logOf(*cmd))
		defer release()
		if err != nil {
			// The log says why too: someone reading only the log must
			// not find it empty.
			if ie, ok := executor.IsImageError(err); ok {
				fmt.Fprintf(logOf(*cmd), "ERROR: the job could not start: %s\n", ie.Message)
			}
			return -1, err
		}
		settings = hostPulled(settings)
	}
	return m.runner.RunInImage(ctx, *ci, *cmd, executor.ImageJob{
		Name: spec.Image.Name, Entrypoint: spec.Image.Entrypoint, User: spec.Image.User, Credentials: creds, Services: svcs,
		Settings: settings, Binds: spec.Image.Binds,
	})
}

// logOf is where a command's output goes.
func logOf(cmd executor.Command) io.Writer {
	if cmd.Output == nil {
		return io.Discard
	}
	return cmd.Output
}

func serviceNames(s []jobsource.Service) string {
	var names []string
	for _, x := range s {
		names = append(names, x.Name)
	}
	return strings.Join(names, ", ")
}

// imageFailure maps a job that could not start in its image.
func imageFailure(err error) (jobsource.FailureKind, string, bool) {
	ie, ok := executor.IsImageError(err)
	if !ok {
		return "", "", false
	}
	if ie.Reason == "image_pull_failure" {
		return jobsource.FailureImagePull, ie.Message, true
	}
	return jobsource.FailureSystem, ie.Message, true
}

// allowedPullPolicies is what a job's image:pull_policy may ask for: the
// [images] allowed_pull_policies, else the admin's pull_policy alone.
func allowedPullPolicies(im config.Images) []string {
	if len(im.AllowedPullPolicies) > 0 {
		return im.AllowedPullPolicies
	}
	return []string{im.PullPolicy}
}
