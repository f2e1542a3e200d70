package gcp

import (
	"context"
	"path"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/berth-ci/berth/provider"
)

// mapState turns a managed instance's status and current action into
// berth's. firstSeen is when berth first listed it, for the ready timeout.
//
// The current action says what the group is doing to it and wins over
// the status; with no action the status says where it is.
func mapState(status, action string, firstSeen, now time.Time, readyTimeout time.Duration) provider.State {
	creating := func() provider.State {
		if !firstSeen.IsZero() && now.Sub(firstSeen) > readyTimeout {
			return provider.StateTimeout
		}
		return provider.StateCreating
	}
	switch action {
	case "DELETING", "ABANDONING", "RECREATING":
		// A recreation replaces the VM: the ID listed now is the old
		// one's, going away; the new VM comes with its own ID.
		return provider.StateDeleting
	case "SUSPENDING":
		return provider.StateSuspending
	case "RESUMING":
		return provider.StateResuming
	case "CREATING", "CREATING_WITHOUT_RETRIES", "VERIFYING", "STARTING", "REFRESHING", "RESTARTING":
		return creating()
	}
	switch status {
	case "RUNNING":
		return provider.StateRunning
	case "SUSPENDING":
		return provider.StateSuspending
	case "SUSPENDED":
		return provider.StateSuspended
	case "PROVISIONING", "STAGING", "":
		return creating()
	}
	// STOPPING, STOPPED, TERMINATED, REPAIRING without an action of its
	// own: stopped by someone else or preempted; the group repairs it by
	// recreating it under a new ID.
	return provider.StateDeleting
}

// refOf reads zone and name from a managed instance's URL.
func refOf(mi *computepb.ManagedInstance) ref {
	u := mi.GetInstance()
	r := ref{name: path.Base(u)}
	if i := strings.Index(u, "/zones/"); i >= 0 {
		r.zone = strings.Split(u[i+len("/zones/"):], "/")[0]
	}
	if mi.GetName() != "" {
		r.name = mi.GetName()
	}
	return r
}

// list reads the group's instances, every page, and replaces the ID
// index with what they say.
func (g *Group) list(ctx context.Context) (mis []*computepb.ManagedInstance, err error) {
	err = g.retry(ctx, "instanceGroupManagers.listManaged", func() error { mis, err = g.mig.listManaged(ctx); return err })
	if err != nil {
		return nil, err
	}
	// The index holds only what the group lists now: a VM the group
	// recreated under the same name keeps its name but not its ID, and
	// the old ID must not resolve to the new VM.
	refs := map[string]ref{}
	for _, mi := range mis {
		if mi.GetId() != 0 {
			refs[strconv.FormatUint(mi.GetId(), 10)] = refOf(mi)
		}
	}
	g.mu.Lock()
	g.refs = refs
	g.mu.Unlock()
	return mis, nil
}

// Update lists the group's instances with their states. An instance's ID
// is Compute Engine's numeric instance ID, which a recreation (the group
// repairing a preempted or broken VM under the same name) changes: berth
// sees the old one deleted and the new one created. An instance the
// group created but does not list yet is not reported; berth counts it as
// a pending increase until it appears. An instance berth saw that the
// group no longer lists is reported deleted, once.
func (g *Group) Update(ctx context.Context, fn func(id string, s provider.State)) error {
	mis, err := g.list(ctx)
	if err != nil {
		return err
	}
	// Members the group failed to create have no ID to report: give their
	// target back so they are not created long after berth gave up.
	g.dropFailedSeen(ctx, mis)
	now := g.now()
	type entry struct {
		id string
		st provider.State
	}
	var out []entry
	g.mu.Lock()
	listed := map[string]bool{}
	for _, mi := range mis {
		if mi.GetId() == 0 {
			// Not created yet: no ID to report. berth counts it as a
			// pending increase; a failed one was given back above.
			continue
		}
		id := strconv.FormatUint(mi.GetId(), 10)
		listed[id] = true
		if _, ok := g.firstSeen[id]; !ok {
			g.firstSeen[id] = now
		}
		out = append(out, entry{id, mapState(mi.GetInstanceStatus(), mi.GetCurrentAction(), g.firstSeen[id], now, g.cfg.InstanceReadyTimeout)})
	}
	for id := range g.firstSeen {
		if !listed[id] {
			out = append(out, entry{id, provider.StateDeleted})
			delete(g.firstSeen, id)
			delete(g.refs, id)
			delete(g.hostKeys, id)
		}
	}
	g.mu.Unlock()
	for _, e := range out {
		fn(e.id, e.st)
	}
	return nil
}
