package gcp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/berth-ci/berth/provider"
)

// Creation failures. A resize only sets the group's target size and ends
// DONE even when no instance can be created ("You must separately verify
// the status of the creating or deleting actions with the
// listmanagedinstances method": instanceGroupManagers.resize). A member
// the group fails to create is listed with currentAction CREATING, no id
// ("empty when instance does not exist") and the error of its last
// attempt in lastAttempt.errors, and the group retries it until it
// succeeds: left alone, every such member is created when capacity
// returns, long after berth gave up on it.
//
// Quota and capacity refusals are transient for berth, by the rule of
// provider.ErrQuota: it keeps running and asks again later (after
// provider.CreationBackoff), and each says what the operator can do.
var (
	// ErrQuota: a project quota (CPUS, instances, addresses) does not
	// allow the instances; wraps provider.ErrTransient.
	ErrQuota = fmt.Errorf("gcp: instance creation refused: %w", provider.ErrQuota)
	// ErrStockout: the zone has no capacity for the machine type now;
	// wraps provider.ErrTransient.
	ErrStockout = fmt.Errorf("gcp: instance creation failed: the zone is %w", provider.ErrStockout)
	// ErrCreation: the group failed to create instances for another
	// reason its lastAttempt names (a bad template, a missing image).
	ErrCreation = errors.New("gcp: instance creation failed")
)

// DefaultCreationCheck is how long Increase watches the new members for
// a first attempt that failed; see Config.CreationCheck.
const DefaultCreationCheck = 30 * time.Second

// failing returns the members the group failed to create: no id, and an
// error in lastAttempt.
func failing(mis []*computepb.ManagedInstance) []*computepb.ManagedInstance {
	var out []*computepb.ManagedInstance
	for _, mi := range mis {
		if mi.GetId() == 0 && len(mi.GetLastAttempt().GetErrors().GetErrors()) > 0 {
			out = append(out, mi)
		}
	}
	return out
}

// coming counts members without an id whose creation has not failed
// (yet): the group is creating them.
func coming(mis []*computepb.ManagedInstance) int {
	n := 0
	for _, mi := range mis {
		if mi.GetId() == 0 && len(mi.GetLastAttempt().GetErrors().GetErrors()) == 0 {
			n++
		}
	}
	return n
}

// creationError is the typed error for failed members: ErrQuota when a
// quota refused any, else ErrStockout when a zone had no capacity, else
// ErrCreation; with the codes counted and the first message of each.
func creationError(failed []*computepb.ManagedInstance) error {
	count := map[string]int{}
	msg := map[string]string{}
	for _, mi := range failed {
		for _, e := range mi.GetLastAttempt().GetErrors().GetErrors() {
			count[e.GetCode()]++
			if msg[e.GetCode()] == "" {
				msg[e.GetCode()] = e.GetMessage()
			}
		}
	}
	codes := make([]string, 0, len(count))
	for c := range count {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	var parts []string
	kind, advice := ErrCreation, "fix what the message names (template, image, network)"
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s x%d: %s", c, count[c], msg[c]))
		switch {
		case strings.Contains(c, "QUOTA"):
			kind, advice = ErrQuota, "ask for a higher quota (IAM & Admin > Quotas) or lower max_size; berth asks again later"
		case kind != ErrQuota && (strings.Contains(c, "RESOURCE_POOL_EXHAUSTED") || strings.Contains(c, "STOCKOUT") || strings.Contains(c, "RESOURCE_NOT_AVAILABLE")):
			kind, advice = ErrStockout, "wait, or use a regional group or another machine type; berth asks again later"
		}
	}
	err := fmt.Errorf("%w: the group could not create %d instances (%s); its target size was lowered so that they are not created later: %s",
		kind, len(failed), strings.Join(parts, "; "), advice)
	if kind == ErrCreation {
		return err
	}
	return fmt.Errorf("%w: %w", err, provider.ErrTransient)
}

// watchCreation lists the group until no member is still coming without
// an id (each got one, or its first attempt failed), for at most
// creation_check, and returns the members that failed.
func (g *Group) watchCreation(ctx context.Context) ([]*computepb.ManagedInstance, error) {
	deadline := g.now().Add(g.cfg.CreationCheck)
	for {
		mis, err := g.list(ctx)
		if err != nil {
			return nil, err
		}
		if coming(mis) == 0 || !g.now().Before(deadline) {
			return failing(mis), nil
		}
		select {
		case <-ctx.Done():
			return failing(mis), nil
		case <-time.After(opPoll):
		}
	}
}

// dropFailed gives back the target size of the members that failed, so
// the group stops retrying them. It deletes them by URL through
// deleteInstances, which "reduces the targetSize of the managed instance
// group by the number of instances that you delete" and names exactly
// these members (a resize down "arbitrarily chooses the order in which
// VMs are deleted" and could take a running one); a member listed without
// a URL is given back with a resize. The caller holds scaleMu.
func (g *Group) dropFailed(ctx context.Context, failed []*computepb.ManagedInstance) error {
	var urls []string
	for _, mi := range failed {
		if r := refOf(mi); mi.GetInstance() != "" && r.zone != "" {
			urls = append(urls, r.url(g.cfg.Project))
		}
	}
	if len(urls) == len(failed) {
		err := g.mutate(ctx, "instanceGroupManagers.deleteInstances", func(rid string) (*compute.Operation, error) {
			return g.mig.deleteInstances(ctx, urls, rid)
		})
		if err == nil {
			g.log.Warn("removed the members the group could not create, lowering its target size", "failed", len(failed))
		}
		return err
	}
	m, err := g.getGroup(ctx)
	if err != nil {
		return err
	}
	target := int(m.GetTargetSize())
	to := max(target-len(failed), 0)
	err = g.mutate(ctx, "instanceGroupManagers.resize", func(rid string) (*compute.Operation, error) {
		return g.mig.resize(ctx, int32(to), rid)
	})
	if err == nil {
		g.log.Warn("lowered the group's target size by the members it could not create", "failed", len(failed), "from", target, "to", to)
	}
	return err
}

// dropFailedSeen handles members Update found failing outside an
// Increase (a retry or a recreation that failed later): their target is
// given back, and the error logged. It does nothing while another call
// changes the target size; that call's own check sees them.
func (g *Group) dropFailedSeen(ctx context.Context, mis []*computepb.ManagedInstance) {
	failed := failing(mis)
	if len(failed) == 0 || !g.scaleMu.TryLock() {
		return
	}
	defer g.scaleMu.Unlock()
	cerr := creationError(failed)
	g.creation.Failed(g.now(), cerr)
	if err := g.dropFailed(ctx, failed); err != nil {
		g.log.Warn("members fail to be created, and lowering the target size failed; trying again at the next listing", "failed", len(failed), "err", err, "creation_error", cerr)
		return
	}
	g.log.Error("instance creation failed", "err", cerr)
}
