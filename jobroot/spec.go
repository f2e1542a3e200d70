package jobroot

import (
	"path/filepath"

	"github.com/berth-ci/berth/images"
)

// ImagesDir is the image cache (images.Config.Dir) below a runner's cache
// directory (see CacheDir). The local provider fills it from the host.
func ImagesDir(cacheDir string) string { return filepath.Join(cacheDir, "images") }

// Spec is one job to run in an image, as the executor sends it.
type Spec struct {
	// Image is the reference as the job wrote it.
	Image string `json:"image"`
	// Entrypoint overrides the image's entrypoint when set; a list of one
	// empty string clears it (GitLab's `entrypoint: [""]`).
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Credentials are the job's registry logins.
	Credentials []images.Credential `json:"credentials,omitempty"`
	// Settings are the instance-wide image settings.
	Settings Settings `json:"settings"`
	// Binds are host paths mounted into the job's root.
	Binds []Bind `json:"binds,omitempty"`
	// Env is added after the image's Env (job variables win).
	Env []string `json:"env,omitempty"`
	// BindWorkdir binds the runner's working directory (the instance's job
	// directory) at the same path in the job's root and starts the job
	// there, so a job in an image sees the checkout where a plain job does.
	BindWorkdir bool `json:"bind_workdir,omitempty"`
	// Dir is the working directory; "" is the image's WorkingDir, or /.
	Dir string `json:"dir,omitempty"`
	// Command is the job's command; the image's entrypoint is put before it.
	Command []string `json:"command"`
	// User is the user the command runs as ("name", "uid", "name:group"),
	// looked up in the image's /etc/passwd; "" is the image's User
	// (GitLab's image: docker: user).
	User string `json:"user,omitempty"`
	// Hostname is the job's hostname; "" keeps "berth-job".
	Hostname string `json:"hostname,omitempty"`
	// Services are started from their images before the job and killed
	// after it.
	Services []Service `json:"services,omitempty"`
	// Hosts are extra names of the instance's loopback address in the
	// job's /etc/hosts (the services' aliases).
	Hosts []string `json:"hosts,omitempty"`
}

// Service is a sibling container of the job, as GitLab's services: entry.
type Service struct {
	// Image is the service's image reference.
	Image string `json:"image"`
	// Alias is an extra host name for it; the name derived from the image
	// (GitLab's rule) always works.
	Alias string `json:"alias,omitempty"`
	// Command replaces the image's Cmd; Entrypoint its entrypoint.
	Command    []string `json:"command,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Env is the service's environment over its image's (GitLab: the
	// job's public variables, then the service's own variables).
	Env []string `json:"env,omitempty"`
	// User is as Spec.User, for the service.
	User string `json:"user,omitempty"`
}

// Settings are the [images] config of the instance's group.
type Settings struct {
	// CacheDir holds the image cache and the job directories; "" is
	// $XDG_CACHE_HOME/berth or ~/.cache/berth.
	CacheDir string `json:"cache_dir,omitempty"`
	// CacheBytes bounds the image cache (0: no bound).
	CacheBytes int64 `json:"cache_bytes,omitempty"`
	// Insecure lists registries allowed over plain HTTP.
	Insecure []string `json:"insecure_registries,omitempty"`
	// Allowed holds globs of allowed images; empty allows all.
	Allowed []string `json:"allowed_images,omitempty"`
	// PullPolicy is always, if-not-present or never.
	PullPolicy string `json:"pull_policy,omitempty"`
	// ServicesTimeout is how long, in seconds, the job waits for its
	// services' exposed ports (GitLab Runner's wait_for_services_timeout):
	// 0 is 30, negative does not wait.
	ServicesTimeout int `json:"wait_for_services_timeout,omitempty"`
	// Limits bound each pull (images.Limits; zero fields: no bound).
	Limits images.Limits `json:"limits"`
}

// Bind mounts Source (a path on the instance) at Target in the job's root.
type Bind struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}
