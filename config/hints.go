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
			`and the [runners.autoscaler] settings in [autoscaler]`,
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
	},
	"autoscaler": {
		"plugin": `did you mean "provider"? This is GitLab Runner's name; NAME finds the plugin binary berth-provider-NAME (GitLab's fleeting plugins are not berth plugins; ` +
			`see docs/plugins.md)`,
		"plugin_config": `did you mean "provider_config"? This is GitLab Runner's name; [autoscaler.provider_config] is passed to the provider as JSON`,
		"connector_config": "berth logs in over SSH with the user, key and host key the provider reports; remove it " +
			"(a login user or key, if your provider takes one, goes in [autoscaler.provider_config])",
		"limit":               `did you mean "max_instances"? This is GitLab Runner's name`,
		"request_concurrency": `it is a setting of the GitLab source here: move it into the [[source]] with kind = "gitlab"`,
		"update_interval": "berth lists the provider every 2 s, which is not configurable; remove it " +
			"(a plugin that learns of readiness sooner pushes it with the Watch stream)",
		"update_interval_when_expecting": "berth lists the provider every 2 s, which is not configurable; remove it",
	},
}

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
