package awsfake

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
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
	want := `<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r-1</requestId><nextToken>tok</nextToken></DescribeInstancesResponse>`
	if string(b) != want {
		t.Errorf("response\n%s\nwant\n%s", b, want)
	}
}

func post(t *testing.T, c *Cloud, form url.Values, signed bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.URL(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if signed {
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20261203/eu-west-1/autoscaling/aws4_request, SignedHeaders=host, Signature=00")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func newCloud(t *testing.T, opts Options) *Cloud {
	t.Helper()
	opts.Dir = t.TempDir()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestUnsignedRequestsAreRefused(t *testing.T) {
	c := newCloud(t, Options{})
	code, body := post(t, c, url.Values{"Action": {"DescribeAutoScalingGroups"}, "Version": {"2011-01-01"}}, false)
	if code != http.StatusForbidden || !strings.Contains(body, "<Code>MissingAuthenticationToken</Code>") {
		t.Errorf("unsigned request: %d %s", code, body)
	}
}

func TestAutoScalingErrorEnvelope(t *testing.T) {
	c := newCloud(t, Options{MaxSize: 2})
	code, body := post(t, c, url.Values{"Action": {"SetDesiredCapacity"}, "Version": {"2011-01-01"},
		"AutoScalingGroupName": {"berth-ci"}, "DesiredCapacity": {"3"}}, true)
	if code != http.StatusBadRequest || !strings.Contains(body, `<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type><Code>ValidationError</Code><Message>New SetDesiredCapacity value 3 is above max value 2 for the AutoScalingGroup.</Message></Error><RequestId>`) {
		t.Errorf("SetDesiredCapacity above MaxSize: %d %s", code, body)
	}
}

func TestEC2PagesAndTokens(t *testing.T) {
	c := newCloud(t, Options{})
	c.SetDesired(3)
	form := url.Values{"Action": {"DescribeInstances"}, "Version": {"2016-11-15"}, "MaxResults": {"5"}}
	c.opts.PageSize = 2
	_, body := post(t, c, form, true)
	var page struct {
		IDs       []string `xml:"reservationSet>item>instancesSet>item>instanceId"`
		NextToken string   `xml:"nextToken"`
	}
	if err := xml.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.IDs) != 2 || page.NextToken == "" {
		t.Fatalf("first page %+v; want 2 instances and a token", page)
	}
	form.Set("NextToken", page.NextToken)
	_, body = post(t, c, form, true)
	page.IDs, page.NextToken = nil, ""
	if err := xml.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.IDs) != 1 || page.NextToken != "" {
		t.Errorf("last page %+v; want 1 instance and no token", page)
	}
	form.Set("NextToken", "garbage")
	if code, body := post(t, c, form, true); code != http.StatusBadRequest || !strings.Contains(body, "<Code>InvalidNextToken</Code>") {
		t.Errorf("bad token: %d %s", code, body)
	}
}
