package azure

import (
	"context"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"github.com/berth-ci/berth/provider"
)

// op is a Suspend or Resume in flight, which the listing reports instead
// of what the instance view alone would say.
type op int

const (
	opNone op = iota
	opSuspend
	opResume
)

// vmState is what the provider needs of an instance's instance view:
// its provisioning state and power state, lower case, as in the status
// codes "ProvisioningState/succeeded" and "PowerState/running".
type vmState struct {
	provisioning string
	power        string
	created      time.Time
	// failure and failureMessage are the error of a failed provisioning,
	// from the status "ProvisioningState/failed/<code>" (creation.go).
	failure, failureMessage string
}

// stateOf reads an instance's states. The resource's provisioningState
// is the model's; the instance view's statuses add the power state.
func stateOf(vm *armcompute.VirtualMachineScaleSetVM) vmState {
	var s vmState
	p := vm.Properties
	if p == nil {
		return s
	}
	s.provisioning = strings.ToLower(deref(p.ProvisioningState, ""))
	s.created = deref(p.TimeCreated, time.Time{})
	if p.InstanceView == nil {
		return s
	}
	for _, st := range p.InstanceView.Statuses {
		code := deref(st.Code, "")
		lower := strings.ToLower(code)
		if v, ok := strings.CutPrefix(lower, "powerstate/"); ok {
			s.power = v
		}
		if _, ok := strings.CutPrefix(lower, "provisioningstate/"); ok {
			prov, failure, _ := strings.Cut(code[len("provisioningstate/"):], "/")
			if s.provisioning == "" {
				s.provisioning = strings.ToLower(prov)
			}
			if strings.EqualFold(prov, "failed") {
				s.failure, s.failureMessage = failure, deref(st.Message, "")
			}
		}
	}
	return s
}

// mapState turns an instance's provisioning and power states into
// berth's. inFlight is a Suspend or Resume this process has under way.
//
//	provisioning deleting                          deleting
//	provisioning failed, not deallocated           timeout (berth replaces it)
//	creating / starting, or no power state yet     creating (timeout after instance_ready_timeout)
//	running                                        running (suspending while a deallocate is in flight)
//	stopping, stopped, deallocating                suspending
//	deallocated                                    suspended (resuming while a start is in flight)
//	starting after a start                         resuming
func mapState(s vmState, inFlight op, now time.Time, readyTimeout time.Duration) provider.State {
	creating := func() provider.State {
		if !s.created.IsZero() && now.Sub(s.created) > readyTimeout {
			return provider.StateTimeout
		}
		return provider.StateCreating
	}
	switch {
	case s.provisioning == "deleting":
		return provider.StateDeleting
	case s.power == "deallocated":
		if inFlight == opResume {
			return provider.StateResuming
		}
		// Also after a start that failed (provisioning failed): still
		// parked, and a later Resume tries again.
		return provider.StateSuspended
	case s.provisioning == "failed":
		return provider.StateTimeout
	case s.power == "deallocating", s.power == "stopping", s.power == "stopped":
		// Stopped but not deallocated is still billed for compute: a
		// Suspend finishes it.
		return provider.StateSuspending
	case s.power == "running":
		if inFlight == opSuspend {
			return provider.StateSuspending
		}
		if inFlight == opResume || s.provisioning == "succeeded" || s.provisioning == "updating" {
			return provider.StateRunning
		}
		return creating()
	case s.power == "starting" && (inFlight == opResume || s.provisioning == "updating"):
		return provider.StateResuming
	}
	return creating()
}

// listStates lists the set's instances with their instance views,
// following nextLink through every page, by the set's instance ID.
func (g *Group) listStates(ctx context.Context) (map[string]vmState, error) {
	pager := g.vms.NewListPager(g.cfg.ResourceGroup, g.cfg.Name, &armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")})
	listed := map[string]vmState{}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, g.mapErr("list instances", err)
		}
		for _, vm := range page.Value {
			if vm == nil || vm.InstanceID == nil {
				continue
			}
			listed[*vm.InstanceID] = stateOf(vm)
		}
	}
	return listed, nil
}

// Update lists the set's instances. An instance the set created but does
// not list yet is not reported: berth counts it as a pending increase
// until it appears. An instance berth saw that has left the set is
// reported deleted once. An instance the set failed to create for lack
// of capacity or quota is not reported, but deleted (creation.go).
func (g *Group) Update(ctx context.Context, fn func(id string, s provider.State)) error {
	states, err := g.listStates(ctx)
	if err != nil {
		return err
	}
	listed := map[string]vmState{}
	var failed []failedVM
	for num, s := range states {
		if creationFailed(s) {
			failed = append(failed, failedVM{num: num, code: s.failure, message: s.failureMessage})
			continue
		}
		listed[g.cfg.Name+"_"+num] = s
	}
	g.dropFailedSeen(ctx, failed)
	now := g.now()
	type entry struct {
		id string
		st provider.State
	}
	var out []entry
	g.mu.Lock()
	for id, s := range listed {
		if _, ok := g.seen[id]; !ok {
			g.seen[id] = now
		}
		if s.created.IsZero() {
			// No timeCreated (older API versions, some images): the
			// ready timeout counts from when berth first saw it.
			s.created = g.seen[id]
		}
		st := mapState(s, g.inFlightLocked(id), now, g.cfg.InstanceReadyTimeout)
		out = append(out, entry{id, st})
	}
	for id := range g.seen {
		if _, ok := listed[id]; !ok {
			// Reported once: the set no longer lists it.
			out = append(out, entry{id, provider.StateDeleted})
			delete(g.seen, id)
			delete(g.hostKeys, id)
		}
	}
	g.mu.Unlock()
	for _, e := range out {
		fn(e.id, e.st)
	}
	return nil
}

func (g *Group) inFlightLocked(id string) op {
	switch {
	case g.resuming[id]:
		return opResume
	case g.suspending[id] != 0:
		return opSuspend
	}
	return opNone
}
