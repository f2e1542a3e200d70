// Package gitlab is a job source that takes jobs from GitLab through the
// runner API (v4), the same API gitlab-runner uses, and runs them as plain
// shell jobs: berth is the executor, GitLab only sees a runner.
//
// The flow per job follows gitlab-runner: verify the runner token at start,
// long-poll POST /jobs/request (only while the manager holds a booked slot),
// stream the log with PATCH /jobs/:id/trace, keep the job alive with
// PUT /jobs/:id, and report the result with a final PUT that is repeated
// while GitLab answers 202.
package gitlab

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/berth-ci/berth/cache"
)

// Defaults for Config fields left zero. They match gitlab-runner's defaults
// where gitlab-runner has one, so that a GitLab admin sees familiar behaviour.
const (
	DefaultRequestConcurrency = 4
	DefaultCheckInterval      = 3 * time.Second
	DefaultUpdateInterval     = 3 * time.Second
	DefaultMaxUpdateInterval  = 15 * time.Minute
	DefaultKeepAliveInterval  = 30 * time.Second
	DefaultRetryBaseDelay     = 500 * time.Millisecond
	DefaultRetryMaxDelay      = 30 * time.Second
	DefaultRetryLimit         = 5
	DefaultVerifyMaxDelay     = time.Minute
	DefaultOutputLimit        = 4 << 20
	DefaultRequestTimeout     = 2 * time.Minute
	defaultMaxPatchSize       = 1 << 20
)

// Config configures a GitLab source. Only URL and one of Token or TokenFile
// are required; every other field has a default.
type Config struct {
	// URL is GitLab's base URL, e.g. https://gitlab.example.com.
	URL string
	// Token is the runner authentication token (glrt-...) created in GitLab's UI.
	Token string
	// Ledger keeps the jobs handed out until GitLab has their final
	// state, so that a restart fails the ones berth lost (ledger.go);
	// nil keeps none.
	Ledger Ledger
	// TokenFile holds the token instead, so it can live outside berth.toml.
	TokenFile string
	// Name identifies the source in logs and metrics; default "gitlab:" + URL.
	Name string
	// RequestConcurrency bounds how many /jobs/request long-polls are in
	// flight at once, like gitlab-runner's request_concurrency.
	RequestConcurrency int
	// CheckInterval is how long the manager should wait between empty polls,
	// like gitlab-runner's check_interval. The source only reports it.
	CheckInterval time.Duration
	// SystemID identifies this berth process to GitLab (system_id); GitLab
	// shows one runner manager per system ID. Default: random per process.
	SystemID string
	// Version is reported to GitLab as the runner version.
	Version string
	// BuildsDir is where jobs check out sources on the instance; default
	// $HOME/builds, evaluated on the instance.
	BuildsDir string
	// AllowedPullPolicies are the pull policies a job's image:pull_policy
	// may ask for; nil refuses every job that asks for one.
	AllowedPullPolicies []string
	// Cache keeps the jobs' cache: archives between instances; nil turns
	// cache: off (jobs that ask for it are told so in their log).
	Cache cache.Store
	// TempDir is where artifact archives are staged on berth's side
	// (on their way to GitLab, or from it to a dependent job); default
	// the system's temp dir. The manager sets its state dir's tmp/.
	TempDir string
	// MaxArtifactSize caps one artifact archive in bytes, checked while
	// it is packed; 0 leaves the limit to GitLab (413).
	MaxArtifactSize int64
	// ArtifactRetryDelay is the first pause between artifact upload and
	// download attempts (default 1s, doubling, as gitlab-runner).
	ArtifactRetryDelay time.Duration
	// UpdateInterval is the time between log updates until GitLab asks for
	// another one with X-GitLab-Trace-Update-Interval (gitlab-runner's
	// DefaultUpdateInterval, 3 s).
	UpdateInterval time.Duration
	// MaxUpdateInterval caps the interval GitLab may ask for (15 min, as
	// gitlab-runner's MaxUpdateInterval).
	MaxUpdateInterval time.Duration
	// KeepAliveInterval is the shortest silence after which a running job
	// whose log is idle is touched (PUT state=running); the silence is also
	// at least GitLab's update interval. The default of 30 s is
	// gitlab-runner's MinTraceForceSendInterval. The answer carries a
	// cancel (Job-Status), so a job that prints nothing learns it was
	// canceled within max(30 s, GitLab's interval); a job that prints
	// learns it from the next log update, within GitLab's interval.
	KeepAliveInterval time.Duration
	// RetryBaseDelay and RetryMaxDelay bound the exponential backoff used
	// when GitLab answers 409 or 503 to a job request.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	// VerifyMaxDelay caps the pause between runner token checks while
	// GitLab does not answer them at start (default 1 min).
	VerifyMaxDelay time.Duration
	// RetryLimit is how many times a job request is retried before giving up.
	RetryLimit int
	// OutputLimit caps a job's log in bytes; further output is dropped with a notice.
	OutputLimit int
	// RequestTimeout bounds one HTTP call, long-polls included (GitLab holds
	// them about 50 s).
	RequestTimeout time.Duration
	// OnTokenRotation, when set, is told the result of each runner token
	// rotation (RotationOK, RotationFailed, RotationUnsaved; token.go).
	OnTokenRotation func(result string)
	// HTTPClient overrides the HTTP client, e.g. for a custom CA.
	HTTPClient *http.Client
	// CAChain is the PEM bundle berth trusts for GitLab (ca_file), given
	// to jobs as the file variable CI_SERVER_TLS_CA_FILE; "" when GitLab's
	// certificate is checked against the system's roots.
	CAChain string
	// DefaultImage is the image of a job without image: ([[source]]
	// image, like gitlab-runner's [runners.docker] image); "" runs such
	// a job in the instance's shell.
	DefaultImage string
	// RefuseShellJobs refuses a job that would run outside an image
	// (runner_configuration_error): set when allowed_images is, unless
	// the operator allows shell jobs.
	RefuseShellJobs bool
}

// withDefaults returns a copy of c with zero fields set to their defaults,
// the token loaded from TokenFile, and the URL validated.
func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		return c, errors.New("gitlab source: url is required (e.g. url = \"https://gitlab.example.com\")")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("gitlab source: url %q must be an http(s) URL such as https://gitlab.example.com", c.URL)
	}
	if c.ArtifactRetryDelay <= 0 {
		c.ArtifactRetryDelay = time.Second
	}
	// Accept the URL with or without the API suffix, as users paste either.
	c.URL = strings.TrimSuffix(strings.TrimSuffix(c.URL, "/"), "/api/v4")
	switch {
	case c.Token != "" && c.TokenFile != "":
		return c, errors.New("gitlab source: set token or token_file, not both")
	case c.TokenFile != "":
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return c, fmt.Errorf("gitlab source: reading token_file: %w", err)
		}
		c.Token = strings.TrimSpace(string(b))
		if c.Token == "" {
			return c, fmt.Errorf("gitlab source: token_file %s is empty", c.TokenFile)
		}
	case c.Token == "":
		return c, errors.New("gitlab source: token or token_file is required: create a runner in GitLab " +
			"(Settings > CI/CD > Runners > New project runner) and copy its glrt- token")
	}
	if c.Name == "" {
		c.Name = "gitlab:" + c.URL
	}
	if c.RequestConcurrency <= 0 {
		c.RequestConcurrency = DefaultRequestConcurrency
	}
	setDuration(&c.CheckInterval, DefaultCheckInterval)
	setDuration(&c.UpdateInterval, DefaultUpdateInterval)
	setDuration(&c.MaxUpdateInterval, DefaultMaxUpdateInterval)
	setDuration(&c.KeepAliveInterval, DefaultKeepAliveInterval)
	setDuration(&c.RetryBaseDelay, DefaultRetryBaseDelay)
	setDuration(&c.RetryMaxDelay, DefaultRetryMaxDelay)
	setDuration(&c.VerifyMaxDelay, DefaultVerifyMaxDelay)
	setDuration(&c.RequestTimeout, DefaultRequestTimeout)
	if c.RetryLimit <= 0 {
		c.RetryLimit = DefaultRetryLimit
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = DefaultOutputLimit
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.SystemID == "" {
		c.SystemID = "r_" + randomString(12)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	return c, nil
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}
