package config

import (
	"regexp"
	"strings"
)

// runnerHints maps keys of GitLab Runner's config.toml (docker-autoscaler,
// fleeting) that berth spells differently, or does not have, to what to
// write instead. A GitLab admin copies their runner config first; an
// "unknown key" without the berth name would leave them guessing. The outer
// key is the berth table the unknown key sits in, array indices removed
// ("source[1]" is "source").
var runnerHints = map[string]map[string]string{
	"": {
		"runners": `berth has no [[runners]]: write a [[source]] with kind = "gitlab", url and token_file per GitLab runner, ` +
			`and the [runners.autoscaler] settings in [autoscaler]; berth config import FILE does it for gitlab-runner's config.toml`,
		"session_server": "berth has no interactive web terminal; remove it",
		"sentry_dsn":     `berth does not report to Sentry; ship its log (log_format = "json") instead`,
		"concurrent":     "berth has no global job limit: at most autoscaler.max_instances × autoscaler.capacity_per_instance jobs run at once; set those",
		"check_interval": `it is a setting of the GitLab source here: move it into the [[source]] with kind = "gitlab"`,
		"listen_address": `did you mean "listen"? berth's HTTP API, /metrics and /healthz share one address`,
		"builds_dir":     `it is a setting of the GitLab source here: move it into the [[source]] with kind = "gitlab"`,
		"output_limit":   `it is a setting of the GitLab source here: move it into the [[source]] with kind = "gitlab"`,
	},
	"source": {
		"executor":    "berth is the executor: jobs run as shell scripts over SSH on the autoscaler's instances; remove it",
		"limit":       "at most autoscaler.max_instances × autoscaler.capacity_per_instance jobs run at once; set those",
		"tls-ca-file": `did you mean "ca_file"? This is GitLab Runner's name`,
		"tls_ca_file": `did you mean "ca_file"? This is GitLab Runner's name`,
		"autoscaler":  "the autoscaler settings go in the top-level [autoscaler] table, shared by every source",
		"concurrent":  "at most autoscaler.max_instances × autoscaler.capacity_per_instance jobs run at once; set those",
		"tags": "berth takes the jobs GitLab gives this runner's token: set the tags on the runner in GitLab " +
			"(Settings > CI/CD > Runners > edit), not here; remove it",
		"run_untagged": "set it on the runner in GitLab (Settings > CI/CD > Runners > edit); remove it",
		"environment": "berth has no runner-wide job variables; set them as CI/CD variables of the group or project " +
			"(GitLab: Settings > CI/CD > Variables) or under variables: in .gitlab-ci.yml",
		"pre_get_sources_script":  scriptHint,
		"post_get_sources_script": scriptHint,
		"pre_build_script":        scriptHint,
		"post_build_script":       scriptHint,
		"docker": "berth has no [runners.docker]: jobs run in the image their .gitlab-ci.yml names (image:), with the pull settings " +
			"of the top-level [images] table (pull_policy, allowed_images, allowed_pull_policies, wait_for_services_timeout); " +
			"privileged containers and host volumes have no equivalent (docs/images.md)",
		"cache": "the cache is the top-level [cache] table, shared by every source: Path → prefix, and the [runners.cache.s3] keys " +
			"ServerAddress → s3_endpoint, BucketName → bucket, BucketLocation → region, AccessKey → access_key, SecretKey → secret_key, " +
			"Insecure → insecure",
		"machine":           "docker+machine's settings have no place in a source: berth config import maps [runners.machine] to [autoscaler]",
		"shell":             "berth runs job scripts with the instance's sh; remove it",
		"name":              "berth names a GitLab source by its url in logs; remove it (a comment keeps the runner's name)",
		"id":                "GitLab's bookkeeping of the runner; berth needs only the token: remove it",
		"token_obtained_at": "GitLab's bookkeeping of the runner; berth needs only the token: remove it",
		"token_expires_at":  "GitLab's bookkeeping of the runner; berth needs only the token: remove it",
		"cache_dir":         "berth keeps jobs' caches in the top-level [cache], not on the instance; remove it",
	},
	"cache": {
		"type":   `berth keeps caches in dir (the default) or, with s3_endpoint and bucket, in an S3-compatible bucket; remove it`,
		"shared": "berth keeps one cache for every instance and source, keyed by project and cache key; remove it",
		"path":   `did you mean "prefix"? This is GitLab Runner's name`,
		"s3": "write the S3 keys in [cache] itself: ServerAddress → s3_endpoint, BucketName → bucket, BucketLocation → region, " +
			"AccessKey → access_key, SecretKey → secret_key, Insecure → insecure",
		"maxuploadedarchivesize": "berth bounds the cache as a whole with max_size_mb",
	},
	"autoscaler": {
		"plugin": `did you mean "provider"? This is GitLab Runner's name; NAME finds the plugin binary berth-provider-NAME (GitLab's fleeting plugins are not berth plugins; ` +
			`see docs/plugins.md)`,
		"plugin_config": `did you mean "provider_config"? This is GitLab Runner's name; [autoscaler.provider_config] is passed to the provider as JSON`,
		"connector_config": "the cloud providers take the login in [autoscaler.provider_config.connector] (username, key_path; " +
			"aws also use_instance_connect), and use_external_addr as provider_config use_private_address (its opposite); " +
			"the other keys berth does not need",
		"limit":               `did you mean "max_instances"? This is GitLab Runner's name`,
		"request_concurrency": `it is a setting of the GitLab source here: move it into the [[source]] with kind = "gitlab"`,
		"update_interval": "berth lists the provider every 2 s, which is not configurable; remove it " +
			"(a plugin that learns of readiness sooner pushes it with the Watch stream)",
		"update_interval_when_expecting": "berth lists the provider every 2 s, which is not configurable; remove it",
	},
}

const scriptHint = "berth runs no runner-side scripts around jobs: put one-time instance setup in autoscaler.instance_ready_command, " +
	"and per-job steps in the jobs' before_script/after_script (a default: section of .gitlab-ci.yml); remove it"

// policyKeys are the keys of an [[autoscaler.policy]] period. GitLab
// Runner's docs and berth's older samples put idle_count and idle_time
// where a reader looks first, [autoscaler] or the top level; "unknown key"
// there would not say that they exist one table further down.
var policyKeys = []string{"periods", "timezone", "idle_count", "idle_time", "scale_factor", "scale_factor_limit",
	"preemptive_mode", "suspended_idle_time", "suspended_idle_count", "target_wait"}

func init() {
	for _, table := range []string{"", "autoscaler"} {
		for _, k := range policyKeys {
			runnerHints[table][k] = "it is a policy setting: put it in an [[autoscaler.policy]] period " +
				"(a line [[autoscaler.policy]], then " + k + " = ...; the last period whose periods match the time applies; " +
				"see docs/configuration.md)"
		}
	}
}

// runnerHint returns what to write instead of the GitLab Runner key k in
// the table at path, or "".
func runnerHint(path, k string) string {
	return runnerHints[arrayIndex.ReplaceAllString(path, "")][strings.ToLower(k)]
}

var arrayIndex = regexp.MustCompile(`\[\d+\]`)
