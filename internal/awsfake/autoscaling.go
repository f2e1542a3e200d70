package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The Auto Scaling query API's XML shapes, as documented in its API
// reference: results wrapped in <ActionResult>, lists as <member> items.

// asgResponse is <ActionResponse><ActionResult>...</ActionResult>
// <ResponseMetadata>...</ResponseMetadata></ActionResponse>.
type asgResponse struct {
	action string
	result any
}

func (r asgResponse) MarshalXML(e *xml.Encoder, _ xml.StartElement) error {
	start := xml.StartElement{Name: xml.Name{Local: r.action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: asgXMLNS}}}
	if err := e.EncodeToken(start); err != nil {
		return err
	}
	if err := e.EncodeElement(r.result, xml.StartElement{Name: xml.Name{Local: r.action + "Result"}}); err != nil {
		return err
	}
	meta := struct {
		RequestID string `xml:"RequestId"`
	}{requestID()}
	if err := e.EncodeElement(meta, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}}); err != nil {
		return err
	}
	return e.EncodeToken(start.End())
}

type asgLaunchTemplate struct {
	LaunchTemplateID   string `xml:"LaunchTemplateId"`
	LaunchTemplateName string
	Version            string
}

type asgInstance struct {
	InstanceID           string `xml:"InstanceId"`
	InstanceType         string
	AvailabilityZone     string
	LifecycleState       string
	HealthStatus         string
	ProtectedFromScaleIn bool
	LaunchTemplate       asgLaunchTemplate
}

type asgGroup struct {
	AutoScalingGroupName             string
	AutoScalingGroupARN              string
	MinSize, MaxSize                 int
	DesiredCapacity                  int
	DefaultCooldown                  int
	AvailabilityZones                []string `xml:"AvailabilityZones>member"`
	HealthCheckType                  string
	HealthCheckGracePeriod           int
	CreatedTime                      string
	NewInstancesProtectedFromScaleIn bool
	MixedInstancesPolicy             *asgMixed     `xml:",omitempty"`
	Instances                        []asgInstance `xml:"Instances>member"`
}

type asgMixed struct {
	OnDemandBaseCapacity                int    `xml:"InstancesDistribution>OnDemandBaseCapacity"`
	OnDemandPercentageAboveBaseCapacity int    `xml:"InstancesDistribution>OnDemandPercentageAboveBaseCapacity"`
	SpotAllocationStrategy              string `xml:"InstancesDistribution>SpotAllocationStrategy"`
}

type asgActivity struct {
	ActivityID           string `xml:"ActivityId"`
	AutoScalingGroupName string
	Description          string
	Cause                string
	StartTime            string
	StatusCode           string
	Progress             int
}

func (c *Cloud) callASG(r *http.Request, action string) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.saveLocked() // before the unlock
	if err := c.gate(r, "autoscaling", action); err != nil {
		return nil, err
	}
	c.advanceLocked()
	var (
		result any
		err    *apiError
	)
	f := r.PostForm
	switch action {
	case "DescribeAutoScalingGroups":
		result, err = c.describeGroups(f.Get("NextToken"), f.Get("MaxRecords"), list(f, "AutoScalingGroupNames.member"))
	case "SetDesiredCapacity":
		result, err = c.setDesired(f.Get("AutoScalingGroupName"), f.Get("DesiredCapacity"))
	case "TerminateInstanceInAutoScalingGroup":
		result, err = c.terminateInGroup(f.Get("InstanceId"), f.Get("ShouldDecrementDesiredCapacity"))
	case "SetInstanceProtection":
		result, err = c.setProtection(f.Get("AutoScalingGroupName"), list(f, "InstanceIds.member"), f.Get("ProtectedFromScaleIn"))
	case "EnterStandby":
		result, err = c.enterStandby(f.Get("AutoScalingGroupName"), list(f, "InstanceIds.member"), f.Get("ShouldDecrementDesiredCapacity"))
	case "ExitStandby":
		result, err = c.exitStandby(f.Get("AutoScalingGroupName"), list(f, "InstanceIds.member"))
	default:
		return nil, &apiError{http.StatusBadRequest, "InvalidAction", "The action " + action + " is not valid for this web service."}
	}
	if err != nil {
		return nil, err
	}
	// Changes to desired capacity or standby take effect at once, as the
	// group's next activity would.
	c.advanceLocked()
	return asgResponse{action, result}, nil
}

func (c *Cloud) checkGroup(name string) *apiError {
	if name != c.group.name {
		return validation("AutoScalingGroup name not found - AutoScalingGroup '%s' not found", name)
	}
	return nil
}

func (c *Cloud) describeGroups(token, maxRecords string, names []string) (any, *apiError) {
	max := 50
	if maxRecords != "" {
		v, err := strconv.Atoi(maxRecords)
		if err != nil || v < 1 || v > 100 {
			return nil, validation("1 validation error detected: Value '%s' at 'maxRecords' failed to satisfy constraint: Member must have value between 1 and 100", maxRecords)
		}
		max = v
	}
	var groups []asgGroup
	want := len(names) == 0
	for _, n := range names {
		want = want || n == c.group.name
	}
	if want {
		groups = append(groups, c.groupXML())
	}
	start, end, next, err := c.page(len(groups), token, max)
	if err != nil {
		return nil, err
	}
	return struct {
		Groups    []asgGroup `xml:"AutoScalingGroups>member"`
		NextToken string     `xml:",omitempty"`
	}{groups[start:end], next}, nil
}

func (c *Cloud) groupXML() asgGroup {
	g := asgGroup{
		AutoScalingGroupName: c.group.name,
		AutoScalingGroupARN:  fmt.Sprintf("arn:aws:autoscaling:%s:123456789012:autoScalingGroup:5b7c1a5e-0000-4000-8000-000000000000:autoScalingGroupName/%s", c.opts.Region, c.group.name),
		MinSize:              c.group.min, MaxSize: c.group.max, DesiredCapacity: c.group.desired,
		DefaultCooldown: 300, AvailabilityZones: []string{c.group.availabilityZone},
		HealthCheckType: "EC2", HealthCheckGracePeriod: 300, CreatedTime: "2026-01-01T00:00:00.000Z",
		NewInstancesProtectedFromScaleIn: c.group.newInstancesProtected,
	}
	if c.opts.Spot {
		g.MixedInstancesPolicy = &asgMixed{SpotAllocationStrategy: "price-capacity-optimized"}
	}
	now := c.now()
	for _, id := range c.order {
		in := c.instances[id]
		if in.Lifecycle == "" || now.Before(in.visibleAt) {
			continue
		}
		g.Instances = append(g.Instances, asgInstance{
			InstanceID: in.ID, InstanceType: c.group.itype, AvailabilityZone: c.group.availabilityZone,
			LifecycleState: in.Lifecycle, HealthStatus: in.Health, ProtectedFromScaleIn: in.Protected,
			LaunchTemplate: asgLaunchTemplate{c.group.launchTemplate, "berth-ci", c.group.ltVersion},
		})
	}
	return g
}

func (c *Cloud) setDesired(name, desired string) (any, *apiError) {
	if err := c.checkGroup(name); err != nil {
		return nil, err
	}
	d, err := strconv.Atoi(desired)
	if err != nil {
		return nil, validation("DesiredCapacity %q is not an integer", desired)
	}
	if d > c.group.max {
		return nil, validation("New SetDesiredCapacity value %d is above max value %d for the AutoScalingGroup.", d, c.group.max)
	}
	if d < c.group.min {
		return nil, validation("New SetDesiredCapacity value %d is below min value %d for the AutoScalingGroup.", d, c.group.min)
	}
	c.group.desired = d
	return struct{}{}, nil
}

func (c *Cloud) activity(desc string) asgActivity {
	return asgActivity{ActivityID: requestID(), AutoScalingGroupName: c.group.name, Description: desc,
		Cause:     "At " + c.now().UTC().Format(time.RFC3339) + " a user request was made.",
		StartTime: c.now().UTC().Format("2006-01-02T15:04:05.000Z"), StatusCode: "InProgress"}
}

func (c *Cloud) member(id string) (*Instance, *apiError) {
	in, ok := c.instances[id]
	if !ok || in.Lifecycle == "" {
		return nil, validation("Instance Id not found - No managed instance found for instance ID: %s", id)
	}
	return in, nil
}

func boolParam(s string) (bool, *apiError) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, validation("boolean parameter %q must be true or false", s)
}

func (c *Cloud) terminateInGroup(id, decrement string) (any, *apiError) {
	dec, err := boolParam(decrement)
	if err != nil {
		return nil, err
	}
	in, err := c.member(id)
	if err != nil {
		return nil, err
	}
	counted := in.Lifecycle == LifecyclePending || in.Lifecycle == LifecycleInService
	if dec && counted {
		if c.group.desired-1 < c.group.min {
			return nil, validation("Currently, desired capacity is %d, min size %d. Terminating instance %s with ShouldDecrementDesiredCapacity would violate the group's min size.", c.group.desired, c.group.min, id)
		}
		c.group.desired--
	}
	if in.Lifecycle != LifecycleTerminating {
		c.terminateLocked(in)
	}
	return struct {
		Activity asgActivity
	}{c.activity("Terminating EC2 instance: " + id)}, nil
}

func (c *Cloud) setProtection(name string, ids []string, protected string) (any, *apiError) {
	if err := c.checkGroup(name); err != nil {
		return nil, err
	}
	p, err := boolParam(protected)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 || len(ids) > 50 {
		return nil, validation("InstanceIds must hold 1 to 50 instance IDs, not %d", len(ids))
	}
	for _, id := range ids {
		in, ok := c.instances[id]
		if !ok || in.Lifecycle == "" || in.Lifecycle == LifecycleTerminating {
			return nil, validation("The instance %s is not part of Auto Scaling group %s.", id, name)
		}
	}
	for _, id := range ids {
		c.instances[id].Protected = p
	}
	return struct{}{}, nil
}

func (c *Cloud) enterStandby(name string, ids []string, decrement string) (any, *apiError) {
	if err := c.checkGroup(name); err != nil {
		return nil, err
	}
	dec, err := boolParam(decrement)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		in, err := c.member(id)
		if err != nil {
			return nil, err
		}
		if in.Lifecycle != LifecycleInService {
			return nil, validation("The instance %s is not in InService.", id)
		}
	}
	if dec && c.group.desired-len(ids) < c.group.min {
		return nil, validation("Currently, desired capacity is %d, min size %d. Moving %d instances to Standby with ShouldDecrementDesiredCapacity would violate the group's min size.", c.group.desired, c.group.min, len(ids))
	}
	var acts []asgActivity
	for _, id := range ids {
		c.moveLocked(c.instances[id], LifecycleEnteringStandby, LifecycleStandby)
		if dec {
			c.group.desired--
		}
		acts = append(acts, c.activity("Moving EC2 instance to Standby: "+id))
	}
	return struct {
		Activities []asgActivity `xml:"Activities>member"`
	}{acts}, nil
}

func (c *Cloud) exitStandby(name string, ids []string) (any, *apiError) {
	if err := c.checkGroup(name); err != nil {
		return nil, err
	}
	for _, id := range ids {
		in, err := c.member(id)
		if err != nil {
			return nil, err
		}
		if in.Lifecycle != LifecycleStandby {
			return nil, validation("The instance %s is not in Standby.", id)
		}
	}
	if c.group.desired+len(ids) > c.group.max {
		return nil, validation("ExitStandby of %d instances would raise desired capacity %d above max size %d.", len(ids), c.group.desired, c.group.max)
	}
	var acts []asgActivity
	for _, id := range ids {
		// Through Pending back in service, and then in the group's
		// health checks: an instance still stopped is found unhealthy
		// and replaced.
		c.moveLocked(c.instances[id], LifecyclePending, LifecycleInService)
		c.group.desired++
		acts = append(acts, c.activity("Moving EC2 instance out of Standby: "+id))
	}
	return struct {
		Activities []asgActivity `xml:"Activities>member"`
	}{acts}, nil
}
