package azurefake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	// computeAPIVersion is the Microsoft.Compute version the fake serves,
	// the one armcompute v7 sends; ARM refuses versions a resource
	// provider does not know.
	computeAPIVersion = "2025-04-01"
	// networkAPIVersion is the Microsoft.Network version of the scale set
	// address listings (they live under the Compute path but are served by
	// the network provider, which supports them from this version on).
	networkAPIVersion = "2018-10-01"
)

// apiError is an ARM error: HTTP status, code and message.
type apiError struct {
	status        int
	code, message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errorf(status int, code, format string, a ...any) *apiError {
	return &apiError{status, code, fmt.Sprintf(format, a...)}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ServeHTTP routes a request to the token endpoint, the boot diagnostics
// blobs, or ARM.
func (c *Cloud) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-ms-request-id", randomHex(16))
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) == 4 && parts[1] == "oauth2" && parts[3] == "token":
		c.serveToken(w, r, parts[0])
	case len(parts) == 4 && parts[1] == "v2.0" && parts[2] == ".well-known":
		c.serveOpenIDConfig(w, r, parts[0])
	case len(parts) == 3 && parts[0] == "bootdiagnostics":
		c.serveSerialLog(w, r, parts[1])
	case len(parts) >= 2 && strings.EqualFold(parts[0], "subscriptions"):
		c.serveARM(w, r, parts)
	default:
		writeError(w, errorf(http.StatusNotFound, "InvalidResourceType", "The resource type could not be found in the namespace for path %s.", r.URL.Path))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if v != nil {
		json.NewEncoder(w).Encode(v)
	}
}

// writeError writes ARM's error envelope; azcore reads the code from the
// x-ms-error-code header or the body.
func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("x-ms-error-code", e.code)
	writeJSON(w, e.status, map[string]any{"error": map[string]string{"code": e.code, "message": e.message}})
}

// retryAfter sets the header that tells a client when to come back:
// Retry-After in whole seconds, or x-ms-retry-after-ms below a second.
func retryAfter(h http.Header, d time.Duration) {
	if d < time.Second {
		h.Set("x-ms-retry-after-ms", strconv.FormatInt(d.Milliseconds(), 10))
		return
	}
	h.Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
}

// gate does what every ARM call does first: count it, check the bearer
// token, the caller's role and the throttle.
func (c *Cloud) gate(w http.ResponseWriter, r *http.Request, action, rbac string) bool {
	c.calls[action]++
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if exp, known := c.tokens[tok]; !ok || !known || time.Now().After(exp) {
		writeError(w, errorf(http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid."))
		return false
	}
	if c.denied[action] {
		writeError(w, errorf(http.StatusForbidden, "AuthorizationFailed",
			"The client '%s' with object id '%s' does not have authorization to perform action '%s' over scope '%s' or the scope is invalid. If access was recently granted, please refresh your credentials.",
			c.opts.ClientID, c.opts.ClientID, rbac, c.scaleSetID()))
		return false
	}
	for _, k := range []string{action, ""} {
		if c.throttle[k] > 0 {
			c.throttle[k]--
			retryAfter(w.Header(), c.opts.RetryAfter)
			writeError(w, errorf(http.StatusTooManyRequests, "TooManyRequests",
				"The request is being throttled as the limit has been reached for operation group '%s'.", action))
			return false
		}
	}
	return !c.throttledLocked(w, action)
}

func (c *Cloud) scaleSetID() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s",
		c.opts.Subscription, c.opts.ResourceGroup, c.opts.ScaleSet)
}

// serveARM serves the scale set's resource paths and the operation status
// resources.
func (c *Cloud) serveARM(w http.ResponseWriter, r *http.Request, parts []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.changedLocked()
	c.advanceLocked()
	if !strings.EqualFold(parts[1], c.opts.Subscription) {
		writeError(w, errorf(http.StatusNotFound, "SubscriptionNotFound", "The subscription '%s' could not be found.", parts[1]))
		return
	}
	version := r.URL.Query().Get("api-version")
	if version == "" {
		writeError(w, errorf(http.StatusBadRequest, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests."))
		return
	}
	// /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/operations/{id}
	if len(parts) == 8 && strings.EqualFold(parts[2], "providers") && strings.EqualFold(parts[6], "operations") {
		if !c.gate(w, r, "GetOperation", "Microsoft.Compute/locations/operations/read") {
			return
		}
		c.serveOperation(w, r, parts[7])
		return
	}
	// /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}/...
	if len(parts) < 8 || !strings.EqualFold(parts[2], "resourceGroups") || !strings.EqualFold(parts[4], "providers") ||
		!strings.EqualFold(parts[5], "Microsoft.Compute") || !strings.EqualFold(parts[6], "virtualMachineScaleSets") {
		writeError(w, errorf(http.StatusNotFound, "InvalidResourceType", "The resource type could not be found in the namespace for path %s.", r.URL.Path))
		return
	}
	if !strings.EqualFold(parts[3], c.opts.ResourceGroup) {
		writeError(w, errorf(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", parts[3]))
		return
	}
	if !strings.EqualFold(parts[7], c.opts.ScaleSet) {
		writeError(w, errorf(http.StatusNotFound, "ResourceNotFound", "The Resource 'Microsoft.Compute/virtualMachineScaleSets/%s' under resource group '%s' was not found.", parts[7], parts[3]))
		return
	}
	rest := parts[8:]
	route := r.Method + " " + strings.ToLower(strings.Join(routeShape(rest), "/"))
	network := route == "GET virtualmachines/*/networkinterfaces" || route == "GET publicipaddresses"
	want := computeAPIVersion
	if network {
		want = networkAPIVersion
	}
	if version != want {
		writeError(w, errorf(http.StatusBadRequest, "InvalidApiVersionParameter", "The api-version '%s' is invalid. The supported versions are '%s'.", version, want))
		return
	}
	switch route {
	case "GET ":
		if c.gate(w, r, "GetScaleSet", "Microsoft.Compute/virtualMachineScaleSets/read") {
			writeJSON(w, http.StatusOK, c.scaleSetJSON("Succeeded"))
		}
	case "PATCH ":
		if c.gate(w, r, "UpdateScaleSet", "Microsoft.Compute/virtualMachineScaleSets/write") {
			c.updateScaleSet(w, r)
		}
	case "POST delete":
		if c.gate(w, r, "DeleteInstances", "Microsoft.Compute/virtualMachineScaleSets/delete/action") {
			c.instanceAction(w, r, "DeleteInstances")
		}
	case "POST deallocate":
		if c.gate(w, r, "Deallocate", "Microsoft.Compute/virtualMachineScaleSets/deallocate/action") {
			c.instanceAction(w, r, "Deallocate")
		}
	case "POST start":
		if c.gate(w, r, "Start", "Microsoft.Compute/virtualMachineScaleSets/start/action") {
			c.instanceAction(w, r, "Start")
		}
	case "GET virtualmachines":
		if c.gate(w, r, "ListVMs", "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read") {
			c.listVMs(w, r)
		}
	case "GET virtualmachines/*":
		if c.gate(w, r, "GetVM", "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read") {
			c.getVM(w, r, rest[1])
		}
	case "POST virtualmachines/*/retrievebootdiagnosticsdata":
		if c.gate(w, r, "BootDiagnostics", "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/retrieveBootDiagnosticsData/action") {
			c.bootDiagnostics(w, r, rest[1])
		}
	case "GET virtualmachines/*/networkinterfaces":
		if c.gate(w, r, "ListNICs", "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces/read") {
			c.listNICs(w, rest[1])
		}
	case "GET publicipaddresses":
		if c.gate(w, r, "ListPublicIPs", "Microsoft.Compute/virtualMachineScaleSets/publicIPAddresses/read") {
			c.listPublicIPs(w)
		}
	default:
		writeError(w, errorf(http.StatusNotFound, "InvalidResourceType", "The resource type could not be found for %s %s.", r.Method, r.URL.Path))
	}
}

// routeShape replaces the instance ID segment with *.
func routeShape(rest []string) []string {
	out := append([]string(nil), rest...)
	if len(out) >= 2 && strings.EqualFold(out[0], "virtualMachines") {
		out[1] = "*"
	}
	return out
}

// startOperation records a long-running operation that ends at done and
// answers the request that began it with status and body, and the
// Azure-AsyncOperation, Location and Retry-After headers a poller follows.
func (c *Cloud) startOperation(w http.ResponseWriter, action string, done time.Time, status int, body any) {
	c.pruneOperationsLocked(time.Now())
	id := randomHex(16)
	op := &operation{name: id, started: time.Now(), done: done}
	if e, ok := c.failNext[action]; ok {
		delete(c.failNext, action)
		op.err = &e
	}
	c.ops[id] = op
	base := fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s/operations/%s", c.srv.URL, c.opts.Subscription, c.opts.Location, id)
	w.Header().Set("Azure-AsyncOperation", base+"?p="+id+"&api-version="+computeAPIVersion)
	w.Header().Set("Location", base+"?p="+id+"&monitor=true&api-version="+computeAPIVersion)
	retryAfter(w.Header(), c.opts.PollInterval)
	writeJSON(w, status, body)
}

// operationRetention is how long a finished operation stays pollable.
// ARM documents no retention for Azure-AsyncOperation URLs; azcore's
// pollers follow one until it ends, so an hour is far more than a client
// needs, and pruning keeps a long-lived fake's state file from growing
// without bound. A variable, so tests can shorten it.
var operationRetention = time.Hour

// pruneOperationsLocked drops the operations that ended longer than
// operationRetention ago.
func (c *Cloud) pruneOperationsLocked(now time.Time) {
	for id, op := range c.ops {
		if now.Sub(op.done) > operationRetention {
			delete(c.ops, id)
		}
	}
}

// serveOperation answers the Azure-AsyncOperation URL with the operation's
// status, and the Location URL (monitor=true) with 202 until it ended,
// then 200 with no body.
func (c *Cloud) serveOperation(w http.ResponseWriter, r *http.Request, id string) {
	op, ok := c.ops[id]
	if !ok {
		writeError(w, errorf(http.StatusNotFound, "NotFound", "The operation %s was not found.", id))
		return
	}
	now := time.Now()
	running := now.Before(op.done)
	if r.URL.Query().Get("monitor") == "true" {
		if running {
			w.Header().Set("Location", c.srv.URL+r.URL.RequestURI())
			retryAfter(w.Header(), c.opts.PollInterval)
			writeJSON(w, http.StatusAccepted, nil)
			return
		}
		if op.err != nil {
			writeError(w, &apiError{http.StatusConflict, op.err.code, op.err.message})
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	body := map[string]any{"name": op.name, "startTime": op.started.UTC().Format(time.RFC3339Nano)}
	switch {
	case running:
		body["status"] = "InProgress"
		retryAfter(w.Header(), c.opts.PollInterval)
	case op.err != nil:
		body["status"] = "Failed"
		body["endTime"] = op.done.UTC().Format(time.RFC3339Nano)
		body["error"] = map[string]string{"code": op.err.code, "message": op.err.message}
	default:
		body["status"] = "Succeeded"
		body["endTime"] = op.done.UTC().Format(time.RFC3339Nano)
	}
	writeJSON(w, http.StatusOK, body)
}

// page cuts n items at the skip token of the request, returning the next
// link, "" on the last page.
func (c *Cloud) page(r *http.Request, n int) (start, end int, next string, err *apiError) {
	if tok := r.URL.Query().Get("$skiptoken"); tok != "" {
		v, perr := strconv.Atoi(tok)
		if perr != nil || v < 0 || v > n {
			return 0, 0, "", errorf(http.StatusBadRequest, "InvalidSkipToken", "The skip token '%s' is invalid.", tok)
		}
		start = v
	}
	end = min(n, start+c.opts.PageSize)
	if end < n {
		q := r.URL.Query()
		q.Set("$skiptoken", strconv.Itoa(end))
		u := url.URL{Scheme: "https", Host: r.Host, Path: r.URL.Path, RawQuery: q.Encode()}
		next = u.String()
	}
	return start, end, next, nil
}
