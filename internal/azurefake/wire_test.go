package azurefake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// call makes a raw HTTPS request to the fake and returns the status, the
// headers and the decoded JSON body.
func call(t *testing.T, c *Cloud, method, path, token, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, c.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return resp.StatusCode, resp.Header, m
}

func token(t *testing.T, c *Cloud) string {
	t.Helper()
	o := c.Options()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {o.ClientID}, "client_secret": {o.ClientSecret},
		"scope": {"https://management.core.windows.net//.default"}}
	status, _, body := call(t, c, http.MethodPost, "/"+o.TenantID+"/oauth2/v2.0/token", "", form.Encode())
	tok, _ := body["access_token"].(string)
	if status != 200 || tok == "" || body["token_type"] != "Bearer" {
		t.Fatalf("token: %d %v", status, body)
	}
	return tok
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// ARM's rules come before anything else: a token, an api-version the
// resource provider knows.
func TestARMRefusesWhatARMRefuses(t *testing.T) {
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	set := "/subscriptions/" + c.Options().Subscription + "/resourceGroups/berth/providers/Microsoft.Compute/virtualMachineScaleSets/berth-ci"
	if status, _, body := call(t, c, http.MethodGet, set+"?api-version="+computeAPIVersion, "", ""); status != 401 || errorCode(body) != "InvalidAuthenticationToken" {
		t.Errorf("no token: %d %v", status, body)
	}
	tok := token(t, c)
	if status, _, body := call(t, c, http.MethodGet, set, tok, ""); status != 400 || errorCode(body) != "MissingApiVersionParameter" {
		t.Errorf("no api-version: %d %v", status, body)
	}
	if status, _, body := call(t, c, http.MethodGet, set+"?api-version=2015-01-01", tok, ""); status != 400 || errorCode(body) != "InvalidApiVersionParameter" {
		t.Errorf("old api-version: %d %v", status, body)
	}
	if status, _, body := call(t, c, http.MethodGet, strings.Replace(set, "berth-ci", "other", 1)+"?api-version="+computeAPIVersion, tok, ""); status != 404 || errorCode(body) != "ResourceNotFound" {
		t.Errorf("another set: %d %v", status, body)
	}
	c.Throttle("GetScaleSet", 1)
	status, h, body := call(t, c, http.MethodGet, set+"?api-version="+computeAPIVersion, tok, "")
	if status != 429 || h.Get("Retry-After") != "1" || h.Get("x-ms-error-code") != "TooManyRequests" || errorCode(body) != "TooManyRequests" {
		t.Errorf("throttled: %d %v %v", status, h, body)
	}
	if status, _, body := call(t, c, http.MethodGet, set+"?api-version="+computeAPIVersion, tok, ""); status != 200 || body["name"] != "berth-ci" {
		t.Errorf("after the throttle: %d %v", status, body)
	}
}

// A capacity change is a long-running operation: 200 with
// Azure-AsyncOperation and Location, InProgress until the instances
// booted, then Succeeded; the Location answers 202 until then.
func TestCapacityUpdateIsALongRunningOperation(t *testing.T) {
	c, err := New(Options{BootTime: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tok := token(t, c)
	set := "/subscriptions/" + c.Options().Subscription + "/resourceGroups/berth/providers/Microsoft.Compute/virtualMachineScaleSets/berth-ci?api-version=" + computeAPIVersion
	status, h, body := call(t, c, http.MethodPatch, set, tok, `{"sku": {"capacity": 2}}`)
	async, loc := h.Get("Azure-AsyncOperation"), h.Get("Location")
	if status != 200 || async == "" || loc == "" || h.Get("x-ms-retry-after-ms") != "50" {
		t.Fatalf("PATCH: %d %v %v", status, h, body)
	}
	if props, _ := body["properties"].(map[string]any); props["provisioningState"] != "Updating" {
		t.Errorf("PATCH body: %v", body)
	}
	path := func(u string) string { p, _ := url.Parse(u); return p.RequestURI() }
	if _, _, op := call(t, c, http.MethodGet, path(async), tok, ""); op["status"] != "InProgress" {
		t.Errorf("operation right after the PATCH: %v", op)
	}
	if status, _, _ := call(t, c, http.MethodGet, path(loc), tok, ""); status != 202 {
		t.Errorf("Location right after the PATCH: %d", status)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, op := call(t, c, http.MethodGet, path(async), tok, "")
		if op["status"] == "Succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation never ended: %v", op)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status, _, _ := call(t, c, http.MethodGet, path(loc), tok, ""); status != 200 {
		t.Errorf("Location after the operation: %d", status)
	}
	if n := len(c.Live()); n != 2 || c.Capacity() != 2 {
		t.Errorf("%d instances, capacity %d; want 2, 2", n, c.Capacity())
	}
}

func TestTokenEndpointRefusesAWrongSecret(t *testing.T) {
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.Options()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {o.ClientID}, "client_secret": {"nope"}}
	status, _, body := call(t, c, http.MethodPost, "/"+o.TenantID+"/oauth2/v2.0/token", "", form.Encode())
	if status != 401 || body["error"] != "invalid_client" {
		t.Errorf("wrong secret: %d %v", status, body)
	}
}
