package gcp

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	compute "cloud.google.com/go/compute/apiv1"
)

// instanceID is the shape of a Compute Engine instance ID (an unsigned
// 64-bit number); anything else is refused before Google is asked.
var instanceID = regexp.MustCompile(`^[1-9][0-9]{0,19}$`)

// Increase raises the group's target size by n, or by as much as max_size
// allows (counting suspended instances, which keep their room), and
// returns how many instances it asked for; the group creates them and a
// later Update lists them. The resize operation is polled to DONE.
func (g *Group) Increase(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	if err := g.creation.Active(g.now()); err != nil {
		return 0, err
	}
	m, err := g.getGroup(ctx)
	if err != nil {
		return 0, err
	}
	target, suspended := int(m.GetTargetSize()), int(m.GetTargetSuspendedSize())
	add := n
	if g.cfg.MaxSize > 0 {
		add = min(n, g.cfg.MaxSize-target-suspended)
	}
	short := func(added int) error {
		return fmt.Errorf("%w: asked for %d more instances, added %d: group %s has target size %d (before this call), %d suspended, max_size %d; raise max_size or lower berth's max_instances to match",
			ErrMaxSize, n, added, g.cfg.Name, target, suspended, g.cfg.MaxSize)
	}
	if add <= 0 {
		g.log.Warn("increase refused: group at max_size", "requested", n, "target_size", target, "suspended", suspended, "max_size", g.cfg.MaxSize)
		return 0, short(0)
	}
	err = g.mutate(ctx, "instanceGroupManagers.resize", func(rid string) (*compute.Operation, error) {
		return g.mig.resize(ctx, int32(target+add), rid)
	})
	if err != nil {
		return 0, err
	}
	g.log.Info("resized the group", "requested", n, "added", add, "from", target, "to", target+add, "suspended", suspended, "max_size", g.cfg.MaxSize)
	// The resize is DONE once the target is set; whether the instances
	// can be created shows only in the listing (creation.go).
	failed, err := g.watchCreation(ctx)
	if err != nil {
		g.log.Warn("could not check the new instances' creation; a later listing does", "err", err)
	} else if len(failed) > 0 {
		cerr := creationError(failed)
		g.creation.Failed(g.now(), cerr)
		g.log.Error("instance creation failed", "requested", n, "failed", len(failed), "next_try_in", g.creation.Wait(), "err", cerr)
		if derr := g.dropFailed(ctx, failed); derr != nil {
			cerr = fmt.Errorf("%w; lowering the target size failed too, a later listing tries again: %v", cerr, derr)
		}
		return max(add-len(failed), 0), cerr
	}
	g.creation.Reset()
	if add < n {
		return add, short(add)
	}
	return add, nil
}

// resolve maps IDs to instances of the group, listing it again when one
// is not known yet, or always with fresh (before a change: the group
// addresses instances by name, and a name may have passed to a recreated
// VM since the last listing). IDs that are not instance IDs are errors;
// well-formed IDs the group does not hold are returned in gone.
func (g *Group) resolve(ctx context.Context, ids []string, fresh bool) (found map[string]ref, gone []string, errs []error) {
	found = map[string]ref{}
	lookup := func() (missing []string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, id := range ids {
			if r, ok := g.refs[id]; ok {
				found[id] = r
			} else if instanceID.MatchString(id) {
				missing = append(missing, id)
			}
		}
		return missing
	}
	for _, id := range ids {
		if !instanceID.MatchString(id) {
			errs = append(errs, fmt.Errorf("%w: %q is not a Compute Engine instance ID", ErrUnknownInstance, id))
		}
	}
	if fresh {
		if _, err := g.list(ctx); err != nil {
			return nil, nil, append(errs, err)
		}
	}
	if missing := lookup(); len(missing) > 0 {
		if fresh {
			return found, missing, errs
		}
		if _, err := g.list(ctx); err != nil {
			return nil, nil, append(errs, err)
		}
		clear(found)
		gone = lookup()
	}
	return found, gone, errs
}

// Decrease deletes the given instances through the group's
// deleteInstances, which lowers its target size so that nothing replaces
// them. An instance already gone is accepted: deletes are idempotent.
func (g *Group) Decrease(ctx context.Context, ids []string) ([]string, error) {
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	found, gone, errs := g.resolve(ctx, ids, true)
	accepted := append([]string(nil), gone...)
	for _, id := range gone {
		g.log.Info("instance already gone from the group", "id", id)
	}
	var urls, del []string
	for _, id := range ids {
		if r, ok := found[id]; ok {
			urls = append(urls, r.url(g.cfg.Project))
			del = append(del, id)
		}
	}
	if len(urls) == 0 {
		return accepted, errors.Join(errs...)
	}
	err := g.mutate(ctx, "instanceGroupManagers.deleteInstances", func(rid string) (*compute.Operation, error) {
		return g.mig.deleteInstances(ctx, urls, rid)
	})
	if err != nil {
		return accepted, errors.Join(append(errs, err)...)
	}
	g.log.Info("deleting instances through the group, lowering its target size", "ids", del)
	return append(accepted, del...), errors.Join(errs...)
}
