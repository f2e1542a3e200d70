package runnerimport

import (
	"sort"
	"strings"
	"time"
)

// machineClouds maps a docker-machine driver to the berth provider of the
// same cloud, with the MachineOptions that carry over to its
// provider_config and connector.
var machineClouds = map[string]struct {
	provider string
	config   map[string]string // MachineOptions name → provider_config key
	user     string            // MachineOptions name of the SSH user
	key      string            // MachineOptions name of the SSH private key
}{
	"amazonec2": {"aws", map[string]string{"amazonec2-region": "region"}, "amazonec2-ssh-user", "amazonec2-ssh-keypath"},
	"google":    {"gcp", map[string]string{"google-project": "project", "google-zone": "zone"}, "google-username", ""},
	"azure": {"azure", map[string]string{"azure-subscription-id": "subscription_id", "azure-resource-group": "resource_group"},
		"azure-ssh-user", ""},
}

// machine maps [runners.machine] of the docker+machine executor. There,
// docker-machine creates each VM from MachineOptions; berth scales a group
// created once, so the options become a comment saying so, and those that
// name the group's place (region, project, zone) carry over.
func (im *importer) machine(sel *runner, fleet []*runner, m *tbl) {
	b := im.add("[autoscaler]")
	driver := strings.ToLower(m.str("MachineDriver"))
	mc, known := machineClouds[driver]
	if !known {
		b.note("MachineDriver = %s: berth has no provider for it; the local provider (the default) runs jobs on this host.", quote(driver))
		b.note("For a cloud fleet see docs/aws.md, docs/gcp.md, docs/azure.md.")
	} else {
		b.set("provider", mc.provider)
	}
	b.note("docker+machine runs one job per machine at a time")
	b.set("capacity_per_instance", 1)
	if v, ok := m.take("MaxBuilds"); ok {
		if n, ok := v.(int64); ok && n > 0 {
			b.set("max_use_count", n)
		}
	}
	im.limitToMax(b, fleet, 1)

	optsV, _ := m.take("MachineOptions")
	opts := map[string]string{}
	for _, o := range stringsOf(optsV) {
		k, v, _ := strings.Cut(o, "=")
		opts[strings.ToLower(k)] = v
	}
	name := strings.Trim(strings.ReplaceAll(m.str("MachineName"), "%s", ""), "-_.")
	if known {
		pcb := im.add("[autoscaler.provider_config]")
		pcb.note("docker-machine created each VM from MachineOptions; berth scales a group you create once from them")
		pcb.note("(%s): this is its name, from MachineName.", groupKind[mc.provider])
		pcb.set("name", name)
		for _, opt := range sortedKeys(mc.config) {
			if v := opts[opt]; v != "" {
				pcb.set(mc.config[opt], v)
			}
		}
		if v := opts["amazonec2-use-private-address"]; v != "" {
			pcb.set("use_private_address", v == "true")
		}
		pcb.dropped("runners.machine.MachineOptions", optsV, reason("runners.machine", "machineoptions"))
		conn := im.add("[autoscaler.provider_config.connector]")
		if u := opts[mc.user]; u != "" {
			conn.set("username", u)
		}
		switch {
		case mc.key != "" && opts[mc.key] != "":
			conn.set("key_path", opts[mc.key])
		case mc.provider == "aws":
			conn.note("docker-machine made a key per machine; berth pushes a one-time key with EC2 Instance Connect")
			conn.note("(the image must run ec2-instance-connect), or set key_path to the launch template key pair's private key")
			conn.set("use_instance_connect", true)
		default:
			conn.note("key_path = \"...\": docker-machine made a key per machine; berth logs in with the private key whose")
			conn.note("public half the group's template holds: set it")
		}
	} else if optsV != nil {
		b.dropped("runners.machine.MachineOptions", optsV, reason("runners.machine", "machineoptions"))
	}

	im.machinePolicy(m, true)
	for _, p := range m.subs("autoscaling") {
		im.machinePolicy(p, false)
	}
	m.rest(b)
}

var groupKind = map[string]string{
	"aws":   "an EC2 Auto Scaling group with a launch template, docs/aws.md",
	"gcp":   "a managed instance group with an instance template, docs/gcp.md",
	"azure": "a virtual machine scale set, docs/azure.md",
}

// machinePolicy writes one policy period from [runners.machine] (base: the
// one that applies outside every period) or a
// [[runners.machine.autoscaling]] entry. docker-machine keeps
// min(IdleCount, max(IdleCountMin, IdleScaleFactor × in use)) machines
// idle; berth keeps idle_count + min(scale_factor × in use,
// scale_factor_limit) slots, so the scale factor maps onto
// idle_count = IdleCountMin, scale_factor_limit = IdleCount − IdleCountMin.
func (im *importer) machinePolicy(t *tbl, base bool) {
	pb := im.add("[[autoscaler.policy]]")
	if base {
		pb.note("[runners.machine] outside every period (berth applies the first period when none matches)")
	} else {
		var periods []string
		v, _ := t.take("Periods")
		for _, p := range stringsOf(v) {
			if c, ok := cron5(p); ok {
				periods = append(periods, c)
			} else {
				pb.note("Periods entry %s: berth takes 5-field cron expressions (minute hour day month weekday); rewrite it", quote(p))
			}
		}
		if len(periods) > 0 {
			pb.set("periods", periods)
		}
		if tz := t.str("Timezone"); tz != "" {
			pb.set("timezone", tz)
		}
	}
	idle, _ := takeInt(t, "IdleCount")
	minIdle, _ := takeInt(t, "IdleCountMin")
	factor := 0.0
	if v, ok := t.take("IdleScaleFactor"); ok {
		switch x := v.(type) {
		case float64:
			factor = x
		case int64:
			factor = float64(x)
		}
	}
	if factor > 0 {
		pb.note("IdleCount = %d, IdleCountMin = %d, IdleScaleFactor = %v in docker-machine's terms", idle, minIdle, factor)
		pb.set("idle_count", minIdle)
		pb.set("scale_factor", factor)
		pb.set("scale_factor_limit", max(idle-minIdle, 0))
		idle = minIdle
	} else {
		pb.set("idle_count", idle)
	}
	if secs, ok := takeInt(t, "IdleTime"); ok && secs > 0 {
		pb.set("idle_time", (time.Duration(secs) * time.Second).String())
	}
	if idle == 0 {
		pb.note("no instance idles here, so jobs are taken before their instance exists (GitLab's way with IdleCount = 0)")
		pb.set("preemptive_mode", false)
	}
	if !base {
		t.rest(pb)
	}
}

func takeInt(t *tbl, k string) (int64, bool) {
	v, ok := t.take(k)
	if !ok {
		return 0, false
	}
	n, ok := v.(int64)
	return n, ok
}

// cron5 turns docker-machine's cron expressions (gorhill/cronexpr: 7 fields
// with seconds and year, or 6 with the year) into berth's 5 fields, when
// the year is "*" (berth's periods repeat every year).
func cron5(p string) (string, bool) {
	f := strings.Fields(p)
	switch {
	case len(f) == 5:
		return p, true
	case len(f) == 6 && f[5] == "*":
		return strings.Join(f[:5], " "), true
	case len(f) == 7 && f[6] == "*":
		return strings.Join(f[1:6], " "), true
	}
	return "", false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
