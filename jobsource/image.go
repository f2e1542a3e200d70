package jobsource

// Image is the image a job runs in.
type Image struct {
	// Name is the image reference as the job wrote it.
	Name string
	// Entrypoint overrides the image's entrypoint; [""] clears it.
	Entrypoint []string
	// Credentials are registry logins that came with the job.
	Credentials []RegistryCredential
	// PullPolicy is the job's own pull policy (GitLab's image:pull_policy,
	// already checked against the admin's allowed list); "" is the
	// [images] pull_policy.
	PullPolicy string
	// User is the user the job runs as in its image (GitLab's image:
	// docker: user); "" is the image's own.
	User string
	// Binds are directories of the instance the job sees at the same path
	// in its image (GitLab: a configured builds dir, where berth fetched
	// the sources outside the image).
	Binds []string
}

// RegistryCredential is a registry login (GitLab sends the job's own).
type RegistryCredential struct {
	// Registry is host[:port] as in image names.
	Registry string
	// Username and Password are the login.
	Username, Password string
}

// Service is a sibling container of the job, GitLab's `services:` entry.
type Service struct {
	// Name is the service's image.
	Name string
	// Alias is an extra host name for it.
	Alias string
	// Command and Entrypoint override the image's.
	Command, Entrypoint []string
	// Variables are the service's environment, KEY=VALUE, over its
	// image's (GitLab: the job's public variables and the service's own).
	Variables []string
	// User is the user the service runs as ("" : the image's).
	User string
}
