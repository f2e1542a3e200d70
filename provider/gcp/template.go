package gcp

import (
	"context"
	"fmt"
	"path"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// maxSuspendMemoryMB is the most memory a VM can have and still suspend
// (Compute Engine documents 208 GB).
const maxSuspendMemoryMB = 208 * 1024

// getGroup reads the managed instance group.
func (g *Group) getGroup(ctx context.Context) (m *computepb.InstanceGroupManager, err error) {
	err = g.retry(ctx, "instanceGroupManagers.get", func() error { m, err = g.mig.get(ctx); return err })
	return m, err
}

// template reads the group's instance template (global or regional) from
// its URL.
func (g *Group) template(ctx context.Context, url string) (t *computepb.InstanceTemplate, err error) {
	name := path.Base(url)
	if i := strings.Index(url, "/regions/"); i >= 0 {
		region := strings.Split(url[i+len("/regions/"):], "/")[0]
		err = g.retry(ctx, "instanceTemplates.get", func() error {
			t, err = g.rtemplates.Get(ctx, &computepb.GetRegionInstanceTemplateRequest{Project: g.cfg.Project, Region: region, InstanceTemplate: name})
			return err
		})
		return t, err
	}
	err = g.retry(ctx, "instanceTemplates.get", func() error {
		t, err = g.templates.Get(ctx, &computepb.GetInstanceTemplateRequest{Project: g.cfg.Project, InstanceTemplate: name})
		return err
	})
	return t, err
}

// suspendPossible refuses suspend = true for a template whose machines
// Compute Engine cannot suspend: GPUs attached or bundled, or more than
// 208 GB of memory. Every Suspend would fail otherwise, after berth had
// parked a job's environment on it.
func (g *Group) suspendPossible(ctx context.Context, templateURL string) error {
	t, err := g.template(ctx, templateURL)
	if err != nil {
		return fmt.Errorf("gcp: reading the group's instance template to check that its machines can suspend: %w", err)
	}
	p := t.GetProperties()
	mt := path.Base(p.GetMachineType())
	if n := len(p.GetGuestAccelerators()); n > 0 {
		return fmt.Errorf("%w: suspend = true, but template %s attaches %d GPU type(s), and Compute Engine cannot suspend VMs with GPUs; set suspend = false or use a template without GPUs", ErrUnsupported, t.GetName(), n)
	}
	zone := g.cfg.Zone
	if zone == "" {
		zone = g.cfg.Region + "-b"
	}
	var m *computepb.MachineType
	err = g.retry(ctx, "machineTypes.get", func() (err error) {
		m, err = g.mtypes.Get(ctx, &computepb.GetMachineTypeRequest{Project: g.cfg.Project, Zone: zone, MachineType: mt})
		return err
	})
	if err != nil {
		g.log.Warn("cannot read the template's machine type to check that it can suspend; a failed suspend will say so", "machine_type", mt, "err", err)
		return nil
	}
	switch {
	case len(m.GetAccelerators()) > 0:
		return fmt.Errorf("%w: suspend = true, but machine type %s has GPUs, and Compute Engine cannot suspend VMs with GPUs; set suspend = false or use another machine type", ErrUnsupported, mt)
	case m.GetMemoryMb() > maxSuspendMemoryMB:
		return fmt.Errorf("%w: suspend = true, but machine type %s has %d GB of memory, and Compute Engine suspends VMs of at most 208 GB; set suspend = false or use a smaller machine type", ErrUnsupported, mt, m.GetMemoryMb()/1024)
	}
	if s := p.GetScheduling(); s.GetPreemptible() || s.GetProvisioningModel() == "SPOT" {
		g.log.Warn("the template makes Spot VMs: Compute Engine may preempt a suspended or running instance; berth then sees it deleted and the group recreates it with a fresh disk")
	}
	return nil
}
