package azure

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
)

func (g *Group) setInFlight(m map[string]bool, id string, on bool) {
	g.mu.Lock()
	if on {
		m[id] = true
	} else {
		delete(m, id)
	}
	g.mu.Unlock()
}

// endSuspending forgets the deallocation in flight on id: the one
// numbered seq, or any with seq 0.
func (g *Group) endSuspending(id string, seq int) {
	g.mu.Lock()
	if seq == 0 || g.suspending[id] == seq {
		delete(g.suspending, id)
	}
	g.mu.Unlock()
}

// eachInstance runs one (a suspend or resume) on each of ids and returns
// those it succeeded for.
func (g *Group) eachInstance(ctx context.Context, verb string, ids []string, one func(ctx context.Context, id, num string) error) ([]string, error) {
	if !g.cfg.Suspend {
		return nil, fmt.Errorf("%w: suspend is off; set suspend = true in provider_config", ErrUnsupported)
	}
	var accepted []string
	var errs []error
	for _, id := range ids {
		num, err := g.instanceID(id)
		if err == nil {
			err = one(ctx, id, num)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", verb, id, err))
			continue
		}
		accepted = append(accepted, id)
	}
	return accepted, errors.Join(errs...)
}

func (g *Group) instanceIDs(num string) *armcompute.VirtualMachineScaleSetVMInstanceIDs {
	return &armcompute.VirtualMachineScaleSetVMInstanceIDs{InstanceIDs: to.SliceOfPtrs(num)}
}

// Suspend deallocates each instance: its compute is released and no
// longer billed, its managed OS disk (and so every file) is kept, and it
// stays in the set, holding its place in the capacity. Deallocation takes
// a minute or so; the listing says suspending until it is done, then
// suspended.
func (g *Group) Suspend(ctx context.Context, ids []string) ([]string, error) {
	return g.eachInstance(ctx, "suspend", ids, func(ctx context.Context, id, num string) error {
		p, err := g.sets.BeginDeallocate(ctx, g.cfg.ResourceGroup, g.cfg.Name,
			&armcompute.VirtualMachineScaleSetsClientBeginDeallocateOptions{VMInstanceIDs: g.instanceIDs(num)})
		if err != nil {
			return g.mapErr("deallocate", err)
		}
		g.mu.Lock()
		g.suspendSeq++
		seq := g.suspendSeq
		g.suspending[id] = seq
		g.mu.Unlock()
		go func() {
			defer g.endSuspending(id, seq)
			if _, err := p.PollUntilDone(g.bg, &runtime.PollUntilDoneOptions{Frequency: pollFrequency}); err != nil && g.bg.Err() == nil {
				g.log.Warn("deallocation failed; the instance is listed as it is, and a repeated Suspend tries again", "id", id, "err", g.mapErr("deallocate", err))
				return
			}
			g.log.Info("instance deallocated", "id", id)
		}()
		g.log.Info("suspending instance: deallocating, disk kept", "id", id)
		return nil
	})
}

// Resume starts each instance and waits until the start operation has
// finished, bounded by ctx and instance_ready_timeout. A start can fail
// for lack of capacity in the region (AllocationFailed, and for Spot no
// capacity at the price): the instance then stays deallocated, and the
// error wraps ErrQuota.
func (g *Group) Resume(ctx context.Context, ids []string) ([]string, error) {
	return g.eachInstance(ctx, "resume", ids, func(ctx context.Context, id, num string) error {
		g.setInFlight(g.resuming, id, true)
		defer g.setInFlight(g.resuming, id, false)
		// A start supersedes a deallocation whose poller has not
		// noticed its end yet.
		g.endSuspending(id, 0)
		p, err := g.sets.BeginStart(ctx, g.cfg.ResourceGroup, g.cfg.Name,
			&armcompute.VirtualMachineScaleSetsClientBeginStartOptions{VMInstanceIDs: g.instanceIDs(num)})
		if err != nil {
			return g.mapErr("start", err)
		}
		ctx, cancel := context.WithTimeout(ctx, g.cfg.InstanceReadyTimeout)
		defer cancel()
		if _, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: pollFrequency}); err != nil {
			return g.mapErr("start", err)
		}
		g.log.Info("resumed instance: started", "id", id)
		return nil
	})
}
