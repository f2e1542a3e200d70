package azure

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"github.com/berth-ci/berth/provider"
)

// Creation failures. When Azure cannot allocate the instances of a
// scale-out, the capacity operation ends Failed (AllocationFailed) and the
// instances stay in the set, provisioningState Failed, with the code in
// their instance view's status "ProvisioningState/failed/<code>" at level
// Error (armcompute VirtualMachineScaleSetVMProperties.ProvisioningState,
// InstanceViewStatus). They count in sku.capacity, so left alone they hold
// the room berth asked for, never boot, and, reported as timed out, make
// berth ask for more in a loop. The plugin deletes them (deleteInstances
// lowers the capacity by as many), does not report them, returns a typed
// error (ErrStockout, or ErrQuota) and backs off its next Increase
// (provider.CreationBackoff). A quota refuses the request itself (409
// OperationNotAllowed), which mapErr types the same way.

// DefaultCreationCheck is how long Increase watches the capacity
// operation for an allocation failure; see Config.CreationCheck.
const DefaultCreationCheck = 30 * time.Second

// opPoll is how often Increase polls the capacity operation when Azure
// does not say (it does, with Retry-After).
const opPoll = time.Second

// failedVM is an instance the set could not create.
type failedVM struct {
	num           string // the set's instance ID
	code, message string
}

// creationFailed reports whether an instance failed for lack of capacity
// or quota: provisioning failed with such a code, and never allocated (a
// failed start leaves a deallocated instance, which stays suspended).
func creationFailed(s vmState) bool {
	return s.provisioning == "failed" && s.power != "deallocated" && capacityKind(s.failure) != nil
}

// capacityKind is provider.ErrQuota or provider.ErrStockout for Azure's
// quota and capacity codes, nil for the others.
func capacityKind(code string) error {
	switch strings.ToLower(code) {
	case "allocationfailed", "zonalallocationfailed", "overconstrainedallocationrequest", "skunotavailable", "spotvmcapacitynotavailable",
		"overconstrainedzonalallocationrequest":
		return ErrStockout
	case "operationnotallowed", "quotaexceeded", "resourcequotaexceeded":
		return ErrQuota
	}
	return nil
}

// creationError is the typed error for failed instances: ErrQuota when a
// quota refused any, else ErrStockout; with the codes counted and the
// first message of each.
func creationError(failed []failedVM) error {
	count, msg := map[string]int{}, map[string]string{}
	for _, f := range failed {
		count[f.code]++
		if msg[f.code] == "" {
			msg[f.code] = f.message
		}
	}
	codes := make([]string, 0, len(count))
	for c := range count {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	kind, advice := ErrStockout, "Azure has no capacity for the VM size in the region now: wait, or use another size or region; berth asks again later"
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s x%d: %s", c, count[c], msg[c]))
		if capacityKind(c) == ErrQuota {
			kind, advice = ErrQuota, "ask for a higher vCPU quota for the VM family in the region, or lower max_size; berth asks again later"
		}
	}
	return fmt.Errorf("%w: the scale set could not create %d instances (%s); the plugin deleted them, lowering the capacity, so they do not hold its room: %s: %w",
		kind, len(failed), strings.Join(parts, "; "), advice, provider.ErrTransient)
}

// watchCapacity polls the capacity operation for up to creation_check.
// It returns the operation's error when it failed in that time; when it
// is still running, it is followed in the background and nil returned
// (the listing sees failures later).
func (g *Group) watchCapacity(ctx context.Context, what string, p *runtime.Poller[armcompute.VirtualMachineScaleSetsClientUpdateResponse]) error {
	wctx, cancel := context.WithTimeout(ctx, g.cfg.CreationCheck)
	defer cancel()
	_, err := p.PollUntilDone(wctx, &runtime.PollUntilDoneOptions{Frequency: opPoll})
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		follow(g, what, p)
		return nil
	}
	if err == nil {
		g.log.Info("operation finished", "op", what)
	}
	return err
}

// failedAfter lists the set after a capacity operation failed until the
// instances it failed to create are listed (a new instance can be listed
// late), for at most creation_check.
func (g *Group) failedAfter(ctx context.Context) ([]failedVM, error) {
	deadline := g.now().Add(g.cfg.CreationCheck)
	for {
		failed, err := g.failedInstances(ctx)
		if err != nil || len(failed) > 0 || !g.now().Before(deadline) {
			return failed, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(opPoll / 4):
		}
	}
}

// failedInstances lists the set and returns the instances it failed to
// create.
func (g *Group) failedInstances(ctx context.Context) ([]failedVM, error) {
	listed, err := g.listStates(ctx)
	if err != nil {
		return nil, err
	}
	var out []failedVM
	for num, s := range listed {
		if creationFailed(s) {
			out = append(out, failedVM{num: num, code: s.failure, message: s.failureMessage})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].num < out[j].num })
	return out, nil
}

// dropFailed deletes the failed instances by ID: deleteInstances lowers
// the capacity by as many and names exactly them (a PATCH lowering the
// capacity deletes the highest IDs, whatever they run). The caller holds
// scaleMu.
func (g *Group) dropFailed(ctx context.Context, failed []failedVM) error {
	nums := make([]string, len(failed))
	for i, f := range failed {
		nums[i] = f.num
	}
	err := g.deleteInstances(ctx, nums)
	if errors.Is(err, ErrUnknownInstance) {
		err = nil // gone already
	}
	if err == nil {
		g.log.Warn("deleted the instances the scale set could not create, lowering its capacity", "failed", len(failed), "ids", nums)
	}
	return err
}

// dropFailedSeen handles instances Update found failed outside an
// Increase (a scale-out whose operation outlived creation_check): they
// are deleted and the error recorded for the backoff. It does nothing
// while another call changes the capacity; a later listing sees them.
func (g *Group) dropFailedSeen(ctx context.Context, failed []failedVM) {
	if len(failed) == 0 || !g.scaleMu.TryLock() {
		return
	}
	defer g.scaleMu.Unlock()
	cerr := creationError(failed)
	g.creation.Failed(g.now(), cerr)
	if err := g.dropFailed(ctx, failed); err != nil {
		g.log.Warn("instances failed to be created, and deleting them failed; trying again at the next listing", "failed", len(failed), "err", err, "creation_error", cerr)
		return
	}
	g.log.Error("instance creation failed", "err", cerr)
}
