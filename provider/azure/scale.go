package azure

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"github.com/berth-ci/berth/provider"
)

// pollFrequency is how often a poller asks about an operation when Azure's
// response does not say (it usually does, with Retry-After).
const pollFrequency = 5 * time.Second

// instanceNumber is the shape of the scale set instance IDs ARM uses in
// paths and bodies.
var instanceNumber = regexp.MustCompile(`^[0-9]{1,9}$`)

// instanceID turns berth's instance ID, the instance's name "SET_N", into
// the set's instance ID N; anything else is refused before Azure is asked,
// so berth never acts on a machine of another set.
func (g *Group) instanceID(id string) (string, error) {
	n, ok := strings.CutPrefix(id, g.cfg.Name+"_")
	if !ok || !instanceNumber.MatchString(n) {
		return "", fmt.Errorf("%w: %q is not an instance of scale set %s (want %s_N)", ErrUnknownInstance, id, g.cfg.Name, g.cfg.Name)
	}
	return n, nil
}

// follow polls a long-running operation berth does not wait for until it
// ends, and logs how it ended; the listing shows its effect meanwhile.
func follow[T any](g *Group, what string, p *runtime.Poller[T]) {
	go func() {
		_, err := p.PollUntilDone(g.bg, &runtime.PollUntilDoneOptions{Frequency: pollFrequency})
		switch {
		case err == nil:
			g.log.Info("operation finished", "op", what)
		case g.bg.Err() != nil:
		default:
			g.log.Warn("operation failed", "op", what, "err", g.mapErr(what, err))
		}
	}()
}

// Increase raises the set's capacity by n, or by as much as max_size
// allows, and returns how many instances it asked for; the set creates
// them and a later Update lists them. The capacity counts deallocated
// (suspended) instances too, so their room is kept for them. When the
// limit stops it short the error wraps ErrMaxSize and gives the numbers.
func (g *Group) Increase(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	if err := g.creation.Active(g.now()); err != nil {
		return 0, err
	}
	set, err := g.getSet(ctx)
	if err != nil {
		return 0, err
	}
	cur := capacity(set)
	add := min(n, g.maxSize-cur)
	short := func(added int) error {
		return fmt.Errorf("%w: asked for %d more instances, added %d: scale set %s has capacity %d (before this call) of at most %d; raise max_size or lower berth's max_instances to match",
			ErrMaxSize, n, added, g.cfg.Name, cur, g.maxSize)
	}
	if add <= 0 {
		g.log.Warn("increase refused: scale set at its maximum size", "requested", n, "capacity", cur, "max", g.maxSize)
		return 0, short(0)
	}
	p, err := g.sets.BeginUpdate(ctx, g.cfg.ResourceGroup, g.cfg.Name, armcompute.VirtualMachineScaleSetUpdate{
		SKU: &armcompute.SKU{Capacity: to.Ptr(int64(cur + add))},
	}, nil)
	if err != nil {
		err = g.mapErr("update scale set capacity", err)
		if errors.Is(err, provider.ErrQuota) {
			g.creation.Failed(g.now(), err)
			g.log.Error("scale-out refused for quota", "requested", n, "capacity", cur, "next_try_in", g.creation.Wait(), "err", err)
		}
		return 0, err
	}
	g.log.Info("raised capacity", "requested", n, "added", add, "from", cur, "to", cur+add, "max", g.maxSize)
	// The operation fails when Azure cannot allocate the instances, which
	// stay in the set, failed (creation.go).
	if oerr := g.watchCapacity(ctx, fmt.Sprintf("capacity %d -> %d", cur, cur+add), p); oerr != nil {
		oerr = g.mapErr("update scale set capacity", oerr)
		if capacityKind(codeOf(oerr)) == nil {
			g.log.Warn("operation failed", "op", "update scale set capacity", "err", oerr)
			return add, nil
		}
		failed, lerr := g.failedAfter(ctx)
		cerr := oerr
		if lerr == nil && len(failed) > 0 {
			cerr = creationError(failed)
			if derr := g.dropFailed(ctx, failed); derr != nil {
				cerr = fmt.Errorf("%w; deleting them failed too, a later listing tries again: %v", cerr, derr)
			}
		}
		g.creation.Failed(g.now(), cerr)
		g.log.Error("instance creation failed", "requested", n, "failed", len(failed), "next_try_in", g.creation.Wait(), "err", cerr)
		return max(add-len(failed), 0), cerr
	}
	g.creation.Reset()
	if add < n {
		return add, short(add)
	}
	return add, nil
}

// Decrease deletes the given instances with deleteInstances, which lowers
// the set's capacity by as many, so nothing replaces them. An instance
// that is already gone is accepted: deletes are idempotent. IDs that are
// not instances of the set are refused with ErrUnknownInstance.
func (g *Group) Decrease(ctx context.Context, ids []string) ([]string, error) {
	var accepted, nums []string
	var errs []error
	byNum := map[string]string{}
	for _, id := range ids {
		n, err := g.instanceID(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nums = append(nums, n)
		byNum[n] = id
	}
	if len(nums) == 0 {
		return nil, errors.Join(errs...)
	}
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	err := g.deleteInstances(ctx, nums)
	if errors.Is(err, ErrUnknownInstance) && len(nums) > 1 {
		// One of them is gone and ARM refuses the whole call: delete
		// them one by one.
		for _, n := range nums {
			switch err := g.deleteInstances(ctx, []string{n}); {
			case err == nil, errors.Is(err, ErrUnknownInstance):
				accepted = append(accepted, byNum[n])
			default:
				errs = append(errs, fmt.Errorf("delete %s: %w", byNum[n], err))
			}
		}
		return accepted, errors.Join(errs...)
	}
	switch {
	case err == nil:
		g.log.Info("deleting instances and lowering capacity", "ids", ids)
	case errors.Is(err, ErrUnknownInstance):
		g.log.Info("instance already gone from the scale set", "ids", ids)
	default:
		return nil, errors.Join(append(errs, err)...)
	}
	for _, n := range nums {
		accepted = append(accepted, byNum[n])
	}
	return accepted, errors.Join(errs...)
}

// deleteInstances starts deleteInstances and follows it.
func (g *Group) deleteInstances(ctx context.Context, nums []string) error {
	p, err := g.sets.BeginDeleteInstances(ctx, g.cfg.ResourceGroup, g.cfg.Name,
		armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: to.SliceOfPtrs(nums...)}, nil)
	if err != nil {
		return g.mapErr("delete instances", err)
	}
	follow(g, "delete instances "+strings.Join(nums, ","), p)
	return nil
}
