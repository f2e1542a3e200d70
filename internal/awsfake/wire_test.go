package awsfake

import (
	"encoding/xml"
	"strings"
	"testing"
)

// The EC2 response element carries the results directly, as the EC2 API
// reference shows them.
func TestEC2ResponseShape(t *testing.T) {
	b, err := xml.Marshal(ec2Response{"DescribeInstances", struct {
		RequestID string `xml:"requestId"`
		NextToken string `xml:"nextToken"`
	}{"r-1", "tok"}})
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.HasPrefix(got, `<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>`) || !strings.HasSuffix(got, `<nextToken>tok</nextToken></DescribeInstancesResponse>`) {
		t.Errorf("response is %s", got)
	}
}
