package gcp

import (
	"context"
	"errors"
	"fmt"

	compute "cloud.google.com/go/compute/apiv1"
)

// Suspend suspends instances through the group's suspendInstances: the
// VM's memory and disk are kept (billed as storage), the group lowers its
// target size and raises its target suspended size, so it creates no
// replacement. The operation is polled to DONE; the listing then shows
// the instances suspending until they are suspended.
func (g *Group) Suspend(ctx context.Context, ids []string) ([]string, error) {
	return g.each(ctx, "instanceGroupManagers.suspendInstances", ids, g.mig.suspendInstances)
}

// Resume resumes suspended instances through the group's resumeInstances,
// which gives their room back to the target size. The listing shows them
// resuming until they run again, with the same disk and memory.
func (g *Group) Resume(ctx context.Context, ids []string) ([]string, error) {
	return g.each(ctx, "instanceGroupManagers.resumeInstances", ids, g.mig.resumeInstances)
}

func (g *Group) each(ctx context.Context, what string, ids []string, call func(context.Context, []string, string) (*compute.Operation, error)) ([]string, error) {
	if !g.cfg.Suspend {
		return nil, fmt.Errorf("%w: set suspend = true in provider_config (the template's machine type must be able to suspend: no GPUs, at most 208 GB of memory)", ErrUnsupported)
	}
	found, gone, errs := g.resolve(ctx, ids, true)
	for _, id := range gone {
		errs = append(errs, fmt.Errorf("%w: the group does not hold %s", ErrUnknownInstance, id))
	}
	var urls, acc []string
	for _, id := range ids {
		if r, ok := found[id]; ok {
			urls = append(urls, r.url(g.cfg.Project))
			acc = append(acc, id)
		}
	}
	if len(urls) == 0 {
		return nil, errors.Join(errs...)
	}
	// Suspend and resume change the target sizes Increase reads.
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	if err := g.mutate(ctx, what, func(rid string) (*compute.Operation, error) { return call(ctx, urls, rid) }); err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	g.log.Info("group operation done", "call", what, "ids", acc)
	return acc, errors.Join(errs...)
}
