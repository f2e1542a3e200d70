package runnerimport

import (
	"sort"
	"strings"
	"time"
)

// provider maps a fleeting plugin, as [runners.autoscaler] plugin names it
// (a short name or an OCI reference such as
// "gitlab/fleeting-plugin-aws:latest"), to the berth provider for the same
// cloud; another name is returned as it is.
func provider(plugin string) string {
	p := strings.ToLower(strings.TrimSpace(plugin))
	if i := strings.LastIndex(p, "/"); i >= 0 {
		p = p[i+1:]
	}
	p, _, _ = strings.Cut(p, "@")
	p, _, _ = strings.Cut(p, ":")
	p = strings.TrimPrefix(p, "fleeting-plugin-")
	switch p {
	case "aws":
		return "aws"
	case "googlecloud", "googlecompute", "google", "gcp":
		return "gcp"
	case "azure":
		return "azure"
	}
	return p
}

// cloud is what the import knows of one berth cloud provider: the
// plugin_config keys it renames, and what the others mean.
type cloud struct {
	keys      map[string]string // GitLab plugin_config key → berth provider_config key
	notes     map[string]string // GitLab key → why it has no equivalent
	berthKeys string            // for the message about any other key
	doc       string
}

var clouds = map[string]cloud{
	"aws": {
		keys: map[string]string{"name": "name", "profile": "profile", "region": "region", "endpoint": "endpoint"},
		notes: map[string]string{
			"config_file": "berth's aws provider reads the AWS SDK's files: run berth with AWS_CONFIG_FILE set to this path " +
				"(systemd: Environment=AWS_CONFIG_FILE=...) or name a profile of ~/.aws/config in profile",
			"credentials_file": "berth's aws provider reads the AWS SDK's files: run berth with AWS_SHARED_CREDENTIALS_FILE set to this path " +
				"(systemd: Environment=AWS_SHARED_CREDENTIALS_FILE=...) or name a profile in profile",
		},
		berthKeys: "name, region, profile, endpoint, connector, use_private_address, ssh_port, instance_ready_timeout, suspend, hibernate",
		doc:       "docs/aws.md",
	},
	"gcp": {
		keys: map[string]string{"name": "name", "project": "project", "zone": "zone", "region": "region",
			"credentials_file": "credentials_file", "endpoint": "endpoint"},
		berthKeys: "name, project, zone, region, credentials_file, endpoint, max_size, connector, use_private_address, ssh_port, instance_ready_timeout, suspend",
		doc:       "docs/gcp.md",
	},
	"azure": {
		keys: map[string]string{"name": "name", "subscription_id": "subscription_id", "resource_group_name": "resource_group"},
		berthKeys: "subscription_id, resource_group, name, cloud, endpoint, authority_host, ca_file, connector, use_private_address, " +
			"ssh_port, instance_ready_timeout, suspend, max_size",
		doc: "docs/azure.md",
	},
}

// autoscaler writes [autoscaler] and its policies for the fleet of sel;
// fleet are the runners sharing it.
func (im *importer) autoscaler(sel *runner, fleet []*runner) {
	ex := strings.ToLower(sel.executor)
	switch {
	case ex == "docker-autoscaler" || ex == "instance":
		if a := sel.t.sub("autoscaler"); a != nil {
			im.fleeting(sel, fleet, a)
			return
		}
		b := im.add("[autoscaler]")
		b.note("runner %s has no [runners.autoscaler]: berth's local provider (the default) runs jobs in sandboxes on this host", quote(sel.name))
	case strings.HasSuffix(ex, "+machine"):
		if m := sel.t.sub("machine"); m != nil {
			im.machine(sel, fleet, m)
			return
		}
		b := im.add("[autoscaler]")
		b.note("runner %s has no [runners.machine]: berth's local provider (the default) runs jobs in sandboxes on this host", quote(sel.name))
	default:
		b := im.add("[autoscaler]")
		b.note("executor %s does not autoscale: berth's local provider (the default) runs jobs in sandboxes on this host.", quote(sel.executor))
		b.note("For a cloud fleet see docs/aws.md, docs/gcp.md, docs/azure.md.")
		b.set("provider", "local")
	}
}

// fleeting maps [runners.autoscaler] of the docker-autoscaler and instance
// executors.
func (im *importer) fleeting(sel *runner, fleet []*runner, a *tbl) {
	b := im.add("[autoscaler]")
	plugin := a.str("plugin")
	prov := provider(plugin)
	b.set("provider", prov)
	c, known := clouds[prov]
	if !known {
		b.note("plugin = %s: GitLab's fleeting plugins are not berth plugins; berth starts berth-provider-%s (docs/plugins.md).", quote(plugin), prov)
		b.note("provider_config below is the fleeting plugin's, as it was: check it against the berth plugin's documentation.")
	}
	capacity := int64(1)
	for _, k := range []string{"capacity_per_instance", "max_use_count", "max_instances", "failure_threshold"} {
		if v, ok := a.take(k); ok {
			if n, ok := v.(int64); ok {
				b.set(k, n)
				if k == "capacity_per_instance" && n > 0 {
					capacity = n
				}
			}
		}
	}
	if !a.has("max_instances") {
		im.limitToMax(b, fleet, capacity)
	}
	if v := a.str("instance_ready_command"); v != "" {
		b.set("instance_ready_command", v)
	}
	for _, k := range []string{"delete_instances_on_shutdown"} {
		if v, ok := a.take(k); ok {
			b.set(k, v)
		}
	}
	if v := a.str("instance_acquire_timeout"); v != "" {
		b.set("instance_acquire_timeout", v)
	}

	pcb := im.add("[autoscaler.provider_config]")
	conn := &block{header: "[autoscaler.provider_config.connector]"}
	if pc := a.sub("plugin_config"); pc != nil {
		if known {
			mapKeys(pc, pcb, c, prov)
		} else {
			copyAll(pc, pcb)
		}
	}
	cc := a.sub("connector_config")
	if cc == nil {
		cc = newTbl("runners.autoscaler.connector_config", map[string]any{})
	}
	if known {
		im.connector(cc, pcb, conn, prov, c)
	} else {
		copyAll(cc, conn)
	}
	if !conn.empty() {
		im.blocks = append(im.blocks, conn)
	}
	pols := a.subs("policy")
	if len(pols) == 0 {
		pb := im.add("[[autoscaler.policy]]")
		pb.note("GitLab keeps no idle instance without a policy; berth would keep one, so this says none.")
		pb.note("Raise idle_count (and drop preemptive_mode) to have instances ready before jobs come.")
		pb.set("idle_count", 0)
		pb.set("preemptive_mode", false)
	}
	for _, p := range pols {
		im.policy(p)
	}
	a.rest(b)
}

// limitToMax sets max_instances from the runners' limit when the
// autoscaler has none: GitLab stops taking jobs at limit, berth at
// max_instances × capacity_per_instance.
func (im *importer) limitToMax(b *block, fleet []*runner, capacity int64) {
	var limit int64
	for _, r := range fleet {
		if n, ok := r.t.m["limit"].(int64); ok && n > 0 {
			limit += n
		}
	}
	if limit > 0 {
		b.note("from the runners' limit = %d (GitLab's cap on jobs at once) and capacity_per_instance = %d", limit, capacity)
		b.set("max_instances", (limit+capacity-1)/capacity)
	}
}

// mapKeys writes the plugin_config keys the berth provider c takes under
// their berth names, and the others as comments.
func mapKeys(pc *tbl, pcb *block, c cloud, prov string) {
	keys := make([]string, 0, len(pc.m))
	for k := range pc.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := pc.m[k]
		pc.used[k] = true
		if bk, ok := c.keys[strings.ToLower(k)]; ok {
			pcb.set(bk, v)
		} else if why, ok := c.notes[strings.ToLower(k)]; ok {
			pcb.dropped(join(pc.path, k), v, why)
		} else {
			pcb.dropped(join(pc.path, k), v, "berth's "+prov+" provider has no such key (it takes "+c.berthKeys+"; see "+c.doc+")")
		}
	}
}

// copyAll writes every key of t as it is, for a plugin berth does not know.
func copyAll(t *tbl, b *block) {
	keys := make([]string, 0, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.used[k] = true
		b.set(k, t.m[k])
	}
}

// connector maps connector_config: the login goes to the provider's
// connector table, use_external_addr to use_private_address.
func (im *importer) connector(cc *tbl, pcb, conn *block, prov string, c cloud) {
	if v, ok := cc.take("use_external_addr"); ok {
		if ext, ok := v.(bool); ok {
			pcb.set("use_private_address", !ext)
		}
	}
	if u := cc.str("username"); u != "" {
		conn.set("username", u)
	}
	switch key := cc.str("key_path"); {
	case key != "":
		conn.set("key_path", key)
	case prov == "aws":
		conn.note("no key_path: GitLab pushes a one-time key with EC2 Instance Connect, and so does berth with this")
		conn.note("(the image must run ec2-instance-connect, as Amazon Linux 2023 and Ubuntu do)")
		conn.set("use_instance_connect", true)
	default:
		conn.note("key_path = \"...\": berth's %s provider logs in with a static key; set it to the private key whose public", prov)
		conn.note("half the instances accept (%s)", c.doc)
	}
	cc.rest(conn)
}

// policy maps one [[runners.autoscaler.policy]].
func (im *importer) policy(p *tbl) {
	pb := im.add("[[autoscaler.policy]]")
	if v, ok := p.take("periods"); ok {
		pb.set("periods", stringsOf(v))
	}
	if v := p.str("timezone"); v != "" {
		pb.set("timezone", v)
	}
	// GitLab's idle_count defaults to 0, berth's to 1: always write it.
	var idle int64
	if v, ok := p.take("idle_count"); ok {
		idle, _ = v.(int64)
	}
	pb.set("idle_count", idle)
	if v := p.str("idle_time"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			pb.set("idle_time", d.String())
		} else {
			pb.note("idle_time = %s: not a duration; berth takes \"20m\", \"1h30m\"", quote(v))
		}
	}
	for _, k := range []string{"scale_factor", "scale_factor_limit"} {
		if v, ok := p.take(k); ok {
			pb.set(k, v)
		}
	}
	if v, ok := p.take("preemptive_mode"); ok {
		pb.set("preemptive_mode", v)
	} else if idle == 0 {
		// GitLab turns preemptive mode off when no instance idles.
		pb.set("preemptive_mode", false)
	}
	p.rest(pb)
}
