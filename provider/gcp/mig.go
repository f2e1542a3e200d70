package gcp

import (
	"context"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"
)

// mig is a managed instance group, zonal or regional: the two have the
// same methods on two clients with different request types.
type mig interface {
	get(ctx context.Context) (*computepb.InstanceGroupManager, error)
	resize(ctx context.Context, size int32, requestID string) (*compute.Operation, error)
	deleteInstances(ctx context.Context, urls []string, requestID string) (*compute.Operation, error)
	suspendInstances(ctx context.Context, urls []string, requestID string) (*compute.Operation, error)
	resumeInstances(ctx context.Context, urls []string, requestID string) (*compute.Operation, error)
	listManaged(ctx context.Context) ([]*computepb.ManagedInstance, error)
	close() error
}

// listPageSize is how many managed instances one page asks for: the
// API's maximum, so a large group costs few calls.
const listPageSize = 500

func drain(it *compute.ManagedInstanceIterator) ([]*computepb.ManagedInstance, error) {
	var out []*computepb.ManagedInstance
	for {
		mi, err := it.Next()
		if err == iterator.Done {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, mi)
	}
}

type zonalMIG struct {
	c                   *compute.InstanceGroupManagersClient
	project, zone, name string
}

func newZonal(ctx context.Context, cfg Config, opts []option.ClientOption) (mig, error) {
	c, err := compute.NewInstanceGroupManagersRESTClient(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &zonalMIG{c, cfg.Project, cfg.Zone, cfg.Name}, nil
}

func (m *zonalMIG) get(ctx context.Context) (*computepb.InstanceGroupManager, error) {
	return m.c.Get(ctx, &computepb.GetInstanceGroupManagerRequest{Project: m.project, Zone: m.zone, InstanceGroupManager: m.name})
}

func (m *zonalMIG) resize(ctx context.Context, size int32, rid string) (*compute.Operation, error) {
	return m.c.Resize(ctx, &computepb.ResizeInstanceGroupManagerRequest{Project: m.project, Zone: m.zone, InstanceGroupManager: m.name, Size: size, RequestId: &rid})
}

func (m *zonalMIG) deleteInstances(ctx context.Context, urls []string, rid string) (*compute.Operation, error) {
	return m.c.DeleteInstances(ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{Project: m.project, Zone: m.zone, InstanceGroupManager: m.name, RequestId: &rid,
		InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{Instances: urls, SkipInstancesOnValidationError: proto.Bool(true)}})
}

func (m *zonalMIG) suspendInstances(ctx context.Context, urls []string, rid string) (*compute.Operation, error) {
	return m.c.SuspendInstances(ctx, &computepb.SuspendInstancesInstanceGroupManagerRequest{Project: m.project, Zone: m.zone, InstanceGroupManager: m.name, RequestId: &rid,
		InstanceGroupManagersSuspendInstancesRequestResource: &computepb.InstanceGroupManagersSuspendInstancesRequest{Instances: urls}})
}

func (m *zonalMIG) resumeInstances(ctx context.Context, urls []string, rid string) (*compute.Operation, error) {
	return m.c.ResumeInstances(ctx, &computepb.ResumeInstancesInstanceGroupManagerRequest{Project: m.project, Zone: m.zone, InstanceGroupManager: m.name, RequestId: &rid,
		InstanceGroupManagersResumeInstancesRequestResource: &computepb.InstanceGroupManagersResumeInstancesRequest{Instances: urls}})
}

func (m *zonalMIG) listManaged(ctx context.Context) ([]*computepb.ManagedInstance, error) {
	return drain(m.c.ListManagedInstances(ctx, &computepb.ListManagedInstancesInstanceGroupManagersRequest{Project: m.project, Zone: m.zone, InstanceGroupManager: m.name, MaxResults: proto.Uint32(listPageSize)}))
}

func (m *zonalMIG) close() error { return m.c.Close() }

type regionalMIG struct {
	c                     *compute.RegionInstanceGroupManagersClient
	project, region, name string
}

func newRegional(ctx context.Context, cfg Config, opts []option.ClientOption) (mig, error) {
	c, err := compute.NewRegionInstanceGroupManagersRESTClient(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &regionalMIG{c, cfg.Project, cfg.Region, cfg.Name}, nil
}

func (m *regionalMIG) get(ctx context.Context) (*computepb.InstanceGroupManager, error) {
	return m.c.Get(ctx, &computepb.GetRegionInstanceGroupManagerRequest{Project: m.project, Region: m.region, InstanceGroupManager: m.name})
}

func (m *regionalMIG) resize(ctx context.Context, size int32, rid string) (*compute.Operation, error) {
	return m.c.Resize(ctx, &computepb.ResizeRegionInstanceGroupManagerRequest{Project: m.project, Region: m.region, InstanceGroupManager: m.name, Size: size, RequestId: &rid})
}

func (m *regionalMIG) deleteInstances(ctx context.Context, urls []string, rid string) (*compute.Operation, error) {
	return m.c.DeleteInstances(ctx, &computepb.DeleteInstancesRegionInstanceGroupManagerRequest{Project: m.project, Region: m.region, InstanceGroupManager: m.name, RequestId: &rid,
		RegionInstanceGroupManagersDeleteInstancesRequestResource: &computepb.RegionInstanceGroupManagersDeleteInstancesRequest{Instances: urls, SkipInstancesOnValidationError: proto.Bool(true)}})
}

func (m *regionalMIG) suspendInstances(ctx context.Context, urls []string, rid string) (*compute.Operation, error) {
	return m.c.SuspendInstances(ctx, &computepb.SuspendInstancesRegionInstanceGroupManagerRequest{Project: m.project, Region: m.region, InstanceGroupManager: m.name, RequestId: &rid,
		RegionInstanceGroupManagersSuspendInstancesRequestResource: &computepb.RegionInstanceGroupManagersSuspendInstancesRequest{Instances: urls}})
}

func (m *regionalMIG) resumeInstances(ctx context.Context, urls []string, rid string) (*compute.Operation, error) {
	return m.c.ResumeInstances(ctx, &computepb.ResumeInstancesRegionInstanceGroupManagerRequest{Project: m.project, Region: m.region, InstanceGroupManager: m.name, RequestId: &rid,
		RegionInstanceGroupManagersResumeInstancesRequestResource: &computepb.RegionInstanceGroupManagersResumeInstancesRequest{Instances: urls}})
}

func (m *regionalMIG) listManaged(ctx context.Context) ([]*computepb.ManagedInstance, error) {
	return drain(m.c.ListManagedInstances(ctx, &computepb.ListManagedInstancesRegionInstanceGroupManagersRequest{Project: m.project, Region: m.region, InstanceGroupManager: m.name, MaxResults: proto.Uint32(listPageSize)}))
}

func (m *regionalMIG) close() error { return m.c.Close() }
