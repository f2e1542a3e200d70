package awsfake

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// The EC2 query API's XML shapes, as documented in its API reference:
// lowerCamelCase elements directly under <ActionResponse>, lists as <item>.

// ec2Response is <ActionResponse xmlns=...> holding the body's fields
// directly: EC2 has no Result wrapper. Every body starts with requestId.
type ec2Response struct {
	action string
	body   any
}

func (r ec2Response) MarshalXML(e *xml.Encoder, _ xml.StartElement) error {
	return e.EncodeElement(r.body, xml.StartElement{Name: xml.Name{Local: r.action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2XMLNS}}})
}

type ec2State struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type ec2Tag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type ec2Instance struct {
	InstanceID       string   `xml:"instanceId"`
	ImageID          string   `xml:"imageId"`
	State            ec2State `xml:"instanceState"`
	PrivateIP        string   `xml:"privateIpAddress,omitempty"`
	PublicIP         string   `xml:"ipAddress,omitempty"`
	InstanceType     string   `xml:"instanceType"`
	LaunchTime       string   `xml:"launchTime"`
	AvailabilityZone string   `xml:"placement>availabilityZone"`
	Architecture     string   `xml:"architecture"`
	PlatformDetails  string   `xml:"platformDetails"`
	Lifecycle        string   `xml:"instanceLifecycle,omitempty"`
	Tags             []ec2Tag `xml:"tagSet>item"`
}

type ec2Reservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []ec2Instance `xml:"instancesSet>item"`
}

type ec2StateChange struct {
	InstanceID string   `xml:"instanceId"`
	Current    ec2State `xml:"currentState"`
	Previous   ec2State `xml:"previousState"`
}

func (c *Cloud) callEC2(r *http.Request, action string) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.saveLocked() // before the unlock
	if err := c.gate(r, "ec2", action); err != nil {
		return nil, err
	}
	c.advanceLocked()
	f := r.PostForm
	var (
		body any
		err  *apiError
	)
	switch action {
	case "DescribeInstances":
		body, err = c.describeInstances(f)
	case "StopInstances":
		body, err = c.stopStart(list(f, "InstanceId"), true)
	case "StartInstances":
		body, err = c.stopStart(list(f, "InstanceId"), false)
	case "GetConsoleOutput":
		body, err = c.consoleOutput(f.Get("InstanceId"))
	default:
		return nil, ec2Err("InvalidAction", "The action %s is not valid for this web service.", action)
	}
	if err != nil {
		return nil, err
	}
	c.advanceLocked()
	return ec2Response{action, body}, nil
}

// visible returns the instance if EC2's listing shows it by now.
func (c *Cloud) visible(id string) (*Instance, *apiError) {
	if !strings.HasPrefix(id, "i-") || len(id) < 10 {
		return nil, ec2Err("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
	}
	in, ok := c.instances[id]
	if !ok || c.now().Before(in.visibleAt) {
		return nil, ec2Err("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	}
	return in, nil
}

func (c *Cloud) ec2XML(in *Instance) ec2Instance {
	x := ec2Instance{
		InstanceID: in.ID, ImageID: "ami-0123456789abcdef0", State: ec2State{ec2Codes[in.State], in.State},
		InstanceType: c.group.itype, LaunchTime: in.Launched.UTC().Format("2006-01-02T15:04:05.000Z"),
		AvailabilityZone: c.group.availabilityZone, Architecture: "x86_64", PlatformDetails: "Linux/UNIX",
		Tags: []ec2Tag{{"aws:autoscaling:groupName", c.group.name}},
	}
	if c.opts.Spot {
		x.Lifecycle = "spot"
	}
	// Addresses go with the instance's network interface: gone once it is
	// terminated; a public address only while it runs.
	if in.State != EC2Terminated {
		x.PrivateIP = in.PrivateIP
	}
	if in.State == EC2Running || in.State == EC2Stopping {
		x.PublicIP = in.PublicIP
	}
	return x
}

// filters reads Filter.N.Name / Filter.N.Value.M.
func filters(f url.Values) map[string][]string {
	out := map[string][]string{}
	for i := 1; ; i++ {
		name := f.Get("Filter." + strconv.Itoa(i) + ".Name")
		if name == "" {
			return out
		}
		out[name] = list(f, "Filter."+strconv.Itoa(i)+".Value")
	}
}

func (c *Cloud) describeInstances(f url.Values) (any, *apiError) {
	ids := list(f, "InstanceId")
	max, hasMax, err := intParam(f, "MaxResults")
	if err != nil {
		return nil, err
	}
	if hasMax && len(ids) > 0 {
		return nil, ec2Err("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	if hasMax && (max < 5 || max > 1000) {
		return nil, ec2Err("InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Expecting a value greater than 5.", max)
	}
	var match []*Instance
	if len(ids) > 0 {
		for _, id := range ids {
			in, err := c.visible(id)
			if err != nil {
				return nil, err
			}
			match = append(match, in)
		}
	} else {
		now := c.now()
		for _, id := range c.order {
			if in := c.instances[id]; !now.Before(in.visibleAt) {
				match = append(match, in)
			}
		}
	}
	for name, values := range filters(f) {
		var keep []*Instance
		for _, in := range match {
			var got string
			switch name {
			case "tag:aws:autoscaling:groupName":
				got = c.group.name
			case "instance-state-name":
				got = in.State
			default:
				return nil, ec2Err("InvalidParameterValue", "The filter '%s' is invalid", name)
			}
			for _, v := range values {
				if v == got {
					keep = append(keep, in)
					break
				}
			}
		}
		match = keep
	}
	start, end, next, err := c.page(len(match), f.Get("NextToken"), max)
	if err != nil {
		return nil, err
	}
	var res []ec2Reservation
	for _, in := range match[start:end] {
		res = append(res, ec2Reservation{ReservationID: "r-" + in.ID[2:], OwnerID: "123456789012", Instances: []ec2Instance{c.ec2XML(in)}})
	}
	return struct {
		RequestID    string           `xml:"requestId"`
		Reservations []ec2Reservation `xml:"reservationSet>item"`
		NextToken    string           `xml:"nextToken,omitempty"`
	}{requestID(), res, next}, nil
}

func (c *Cloud) stopStart(ids []string, stop bool) (any, *apiError) {
	if len(ids) == 0 {
		return nil, ec2Err("MissingParameter", "The request must contain the parameter InstanceId")
	}
	for _, id := range ids {
		in, err := c.visible(id)
		if err != nil {
			return nil, err
		}
		if stop && c.opts.Spot {
			return nil, ec2Err("UnsupportedOperation", "You can't stop the Spot Instance '%s' because it is associated with a one-time Spot Instance request. You can only stop Spot Instances associated with persistent Spot Instance requests.", id)
		}
		ok := in.State == EC2Running || in.State == EC2Stopping || in.State == EC2Stopped
		if !stop {
			ok = in.State == EC2Stopped || in.State == EC2Running || in.State == EC2Pending
		}
		if !ok {
			verb := "started"
			if stop {
				verb = "stopped"
			}
			return nil, ec2Err("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be %s.", id, verb)
		}
	}
	var changes []ec2StateChange
	for _, id := range ids {
		in := c.instances[id]
		prev := in.State
		switch {
		case stop && in.State == EC2Running:
			c.stopSSHLocked(in)
			in.State = EC2Stopping
			in.until = c.now().Add(c.opts.StopTime)
			if c.opts.StopTime == 0 {
				in.State, in.until = EC2Stopped, time.Time{}
			}
		case !stop && in.State == EC2Stopped:
			in.State = EC2Pending
			in.until = c.now().Add(c.opts.BootTime)
			if c.opts.BootTime == 0 {
				in.State, in.until = EC2Running, time.Time{}
				c.startSSHLocked(in)
			}
		}
		changes = append(changes, ec2StateChange{id, ec2State{ec2Codes[in.State], in.State}, ec2State{ec2Codes[prev], prev}})
	}
	return struct {
		RequestID string           `xml:"requestId"`
		Changes   []ec2StateChange `xml:"instancesSet>item"`
	}{requestID(), changes}, nil
}

// consoleOutput prints what cloud-init prints at the end of a boot: the
// host key fingerprints (prefixed "ec2:" by its write-ssh-key-fingerprints
// module) and the keys themselves.
func (c *Cloud) consoleOutput(id string) (any, *apiError) {
	in, err := c.visible(id)
	if err != nil {
		return nil, err
	}
	var out string
	if in.State == EC2Running || in.State == EC2Stopping || in.State == EC2Stopped {
		out = consoleText(in, c.opts.Console)
	}
	return struct {
		RequestID  string `xml:"requestId"`
		InstanceID string `xml:"instanceId"`
		Timestamp  string `xml:"timestamp"`
		Output     string `xml:"output,omitempty"`
	}{requestID(), id, c.now().UTC().Format("2006-01-02T15:04:05.000Z"), base64.StdEncoding.EncodeToString([]byte(out))}, nil
}

func consoleText(in *Instance, format ConsoleFormat) string {
	if format == ConsoleEmpty {
		return ""
	}
	host := "ip-" + strings.ReplaceAll(in.PrivateIP, ".", "-")
	pub := in.signer.PublicKey()
	var b strings.Builder
	fmt.Fprintf(&b, "[    0.000000] Linux version 6.1.0-aws\r\n")
	fmt.Fprintf(&b, "[   12.345678] cloud-init[812]: Cloud-init v. 24.1 running 'modules:final'\r\n")
	fmt.Fprintf(&b, "<14>Dec  3 07:00:00 ec2: \r\n")
	fmt.Fprintf(&b, "<14>Dec  3 07:00:00 ec2: #############################################################\r\n")
	fmt.Fprintf(&b, "<14>Dec  3 07:00:00 ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----\r\n")
	fmt.Fprintf(&b, "<14>Dec  3 07:00:00 ec2: 256 %s root@%s (ED25519)\r\n", ssh.FingerprintSHA256(pub), host)
	fmt.Fprintf(&b, "<14>Dec  3 07:00:00 ec2: -----END SSH HOST KEY FINGERPRINTS-----\r\n")
	fmt.Fprintf(&b, "<14>Dec  3 07:00:00 ec2: #############################################################\r\n")
	if format == ConsoleKeys {
		fmt.Fprintf(&b, "-----BEGIN SSH HOST KEY KEYS-----\r\n")
		fmt.Fprintf(&b, "%s root@%s\r\n", in.HostKey, host)
		fmt.Fprintf(&b, "-----END SSH HOST KEY KEYS-----\r\n")
	}
	fmt.Fprintf(&b, "[   13.000000] cloud-init[812]: Cloud-init v. 24.1 finished. Datasource DataSourceEc2Local.\r\n")
	return b.String()
}
