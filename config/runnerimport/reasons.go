package runnerimport

// reasons says, per GitLab Runner key (lower case, dotted, no array index;
// "table.*" for every key of a table), why berth has no equivalent and what
// to do instead. Keys that map to a berth key are not here: they are
// written as berth keys.
var reasons = map[string]string{
	"listen_address":     "berth serves /metrics and /healthz on its API address, listen (default 127.0.0.1:8765); point Prometheus there",
	"sentry_dsn":         "berth does not report to Sentry; ship its log (log_format = \"json\") instead",
	"connection_max_age": "berth keeps its connections to GitLab as long as GitLab allows; remove it",
	"session_server":     "berth has no interactive web terminal; remove it",
	"concurrent":         "berth has no global job limit: at most autoscaler.max_instances × capacity_per_instance jobs run at once",

	"runners.id":                "GitLab's bookkeeping of the runner; berth needs only the token",
	"runners.token_obtained_at": "GitLab's bookkeeping of the runner; berth needs only the token",
	"runners.token_expires_at":  "GitLab's bookkeeping of the runner; berth needs only the token",
	"runners.executor":          "berth is the executor: jobs run over SSH on the autoscaler's instances, in the job's image when it names one",
	"runners.shell":             "berth runs job scripts with the instance's sh; remove it",
	"runners.limit":             "berth has one limit for every source: at most autoscaler.max_instances × capacity_per_instance jobs at once",
	"runners.cache_dir":         "berth keeps jobs' caches in [cache], not on the instance; remove it",
	"runners.environment": "berth has no runner-wide job variables; set them as CI/CD variables of the group or project " +
		"(GitLab: Settings > CI/CD > Variables) or under variables: in .gitlab-ci.yml",
	"runners.pre_get_sources_script":   scriptReason,
	"runners.post_get_sources_script":  scriptReason,
	"runners.pre_build_script":         scriptReason,
	"runners.post_build_script":        scriptReason,
	"runners.tls-cert-file":            "berth presents no client certificate to GitLab; remove it",
	"runners.tls-key-file":             "berth presents no client certificate to GitLab; remove it",
	"runners.clone_url":                "berth clones from the URL GitLab sends with each job; remove it",
	"runners.unhealthy_requests_limit": "berth backs off from a failing GitLab by itself; remove it",
	"runners.unhealthy_interval":       "berth backs off from a failing GitLab by itself; remove it",
	"runners.feature_flags":            "GitLab Runner's feature flags do not apply to berth; remove them",
	"runners.custom_build_dir":         "berth checks jobs out under builds_dir, one directory per job; remove it",
	"runners.debug_trace_disabled":     "berth has no such switch; remove it",

	"runners.docker.privileged": "berth runs image jobs without privileges; a job that needs a privileged container (docker:dind) " +
		"cannot run as it is: build images with a daemonless builder (kaniko, buildah) instead",
	"runners.docker.volumes": "berth mounts no host volumes into jobs: use cache: for what jobs keep between runs and put tools in the image " +
		"(the local provider shows host directories with provider_config host_paths)",
	"runners.docker.disable_cache": "berth keeps no per-job volumes to disable; remove it",
	"runners.docker.helper_image":  "berth needs no helper image: it clones, caches and uploads artifacts itself; remove it",
	"runners.docker.*":             "berth's image jobs have no such setting (docs/images.md lists what they take); remove it",

	"runners.cache.shared":                 "berth keeps one cache for every instance and source of this berth, keyed by project and cache key; remove it",
	"runners.cache.maxuploadedarchivesize": "berth bounds the cache as a whole with [cache] max_size_mb; remove it",
	"runners.cache.s3.authenticationtype": "berth signs S3 requests with access_key and secret_key only: create an access key " +
		"for the bucket and set both in [cache]",
	"runners.cache.*":    "berth's [cache] has no such setting; remove it",
	"runners.cache.s3.*": "berth's [cache] has no such setting; remove it",

	"runners.autoscaler.update_interval":                "berth lists the provider every 2 s, which is not configurable; remove it",
	"runners.autoscaler.update_interval_when_expecting": "berth lists the provider every 2 s, which is not configurable; remove it",
	"runners.autoscaler.vm_isolation":                   "berth runs jobs on the instance itself (in the job's image when it names one), not in nested VMs",
	"runners.autoscaler.state_storage":                  "berth keeps its state in state_dir, which survives restarts; remove it",
	"runners.autoscaler.*":                              "berth's [autoscaler] has no such setting; remove it",
	"runners.autoscaler.policy.*":                       "berth's [[autoscaler.policy]] has no such setting; remove it",

	"runners.autoscaler.connector_config.password":  "berth logs in with a key only: set key_path to the private key the instances accept",
	"runners.autoscaler.connector_config.os":        "berth runs jobs on Linux instances over SSH; remove it",
	"runners.autoscaler.connector_config.arch":      "berth runs jobs on the instance's own architecture; remove it",
	"runners.autoscaler.connector_config.timeout":   "berth's instance_acquire_timeout bounds the wait for an instance, logins included; remove it",
	"runners.autoscaler.connector_config.keepalive": "berth keeps its SSH connections alive itself; remove it",
	"runners.autoscaler.connector_config.protocol":  "berth connects over SSH only; remove it",
	"runners.autoscaler.connector_config.*":         "berth's provider connector has no such setting; remove it",
	"runners.autoscaler.connector_config.use_static_credentials": "berth logs in with connector.key_path when it is given, " +
		"else (AWS) with EC2 Instance Connect; remove it",

	"runners.machine.machineoptions": "docker-machine creates each VM from these options; berth scales a group you create once " +
		"(an Auto Scaling group, a managed instance group or a scale set) whose template carries them: see docs/aws.md, docs/gcp.md, docs/azure.md",
	"runners.machine.maxgrowthrate": "berth paces instance requests with [autoscaler.scale_throttle] limit (per second) and burst",
	"runners.machine.offpeakperiods": "the old off-peak settings: write an [[autoscaler.policy]] whose periods are the off-peak hours, " +
		"with its idle_count and idle_time",
	"runners.machine.offpeaktimezone":  "see OffPeakPeriods",
	"runners.machine.offpeakidlecount": "see OffPeakPeriods",
	"runners.machine.offpeakidletime":  "see OffPeakPeriods",
	"runners.machine.*":                "berth has no such setting; remove it",
	"runners.machine.autoscaling.*":    "berth's [[autoscaler.policy]] has no such setting; remove it",
}

const scriptReason = "berth runs no runner-side scripts around jobs: put one-time instance setup in autoscaler.instance_ready_command, " +
	"and per-job steps in the jobs' before_script/after_script (a default: section of .gitlab-ci.yml)"
