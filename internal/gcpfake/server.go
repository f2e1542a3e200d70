package gcpfake

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// selfLinkBase is what Compute Engine's resource URLs start with, whatever
// endpoint served them.
const selfLinkBase = "https://www.googleapis.com/compute/v1/"

// apiError is a Compute API error: HTTP status, reason and message.
type apiError struct {
	status          int
	reason, message string
}

func (e *apiError) Error() string { return e.reason + ": " + e.message }

func badRequest(format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, "invalid", fmt.Sprintf(format, a...)}
}

func notFound(format string, a ...any) *apiError {
	return &apiError{http.StatusNotFound, "notFound", fmt.Sprintf(format, a...)}
}

// grpcStatus is the status name Google's JSON error envelope carries for
// an HTTP status.
var grpcStatus = map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
	404: "NOT_FOUND", 409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 502: "UNKNOWN", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}

// writeError writes Google's JSON error envelope, which googleapi.Error
// parses: code, message, errors[] with domain and reason, status.
func writeError(w http.ResponseWriter, e *apiError) {
	domain := "global"
	if e.reason == "rateLimitExceeded" {
		domain = "usageLimits"
	}
	status := grpcStatus[e.status]
	if e.reason == "rateLimitExceeded" && e.status == http.StatusForbidden {
		status = "PERMISSION_DENIED"
	}
	writeJSON(w, e.status, map[string]any{"error": map[string]any{
		"code": e.status, "message": e.message, "status": status,
		"errors": []map[string]string{{"message": e.message, "domain": domain, "reason": e.reason}},
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// route is a parsed Compute API path.
type route struct {
	method   string // e.g. "instanceGroupManagers.resize", as in IAM and the docs
	scope    string // "zones/Z", "regions/R" or "global"
	resource string // the resource's name
	verb     string
}

// parse maps "/compute/v1/projects/P/..." to the method it names.
func (c *Cloud) parse(r *http.Request) (route, *apiError) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/compute/v1/projects/"+c.opts.Project+"/")
	if !ok {
		return route{}, notFound("The resource '%s' was not found (project %s)", r.URL.Path, c.opts.Project)
	}
	seg := strings.Split(rest, "/")
	var rt route
	switch {
	case len(seg) >= 4 && (seg[0] == "zones" || seg[0] == "regions"):
		rt.scope, rt.resource = seg[0]+"/"+seg[1], seg[3]
		kind := seg[2]
		if len(seg) == 5 {
			rt.verb = seg[4]
		} else if len(seg) > 5 {
			return route{}, notFound("unknown path %s", r.URL.Path)
		}
		prefix := ""
		if seg[0] == "regions" {
			prefix = "region"
		}
		name := kind
		if prefix != "" {
			name = prefix + strings.ToUpper(kind[:1]) + kind[1:]
		}
		if kind == "operations" && prefix == "" {
			name = "zoneOperations"
		}
		rt.method = name + "." + map[bool]string{true: "get", false: rt.verb}[rt.verb == ""]
	case len(seg) == 3 && seg[0] == "global" && seg[1] == "instanceTemplates":
		rt.scope, rt.resource, rt.method = "global", seg[2], "instanceTemplates.get"
	default:
		return route{}, notFound("unknown path %s", r.URL.Path)
	}
	return rt, nil
}

// ServeHTTP serves the token endpoint and the Compute API.
func (c *Cloud) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		c.serveToken(w, r)
		return
	}
	rt, err := c.parse(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if !c.wait(r, rt.method) {
		return // never arrived
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.saveLocked() // before the unlock
	c.calls[rt.method]++
	if err := c.gate(r, rt); err != nil {
		writeError(w, err)
		return
	}
	c.advanceLocked()
	body, err := c.call(r, rt)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// gate checks what every call checks first: credentials, permission,
// rate.
func (c *Cloud) gate(r *http.Request, rt route) *apiError {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !c.tokens[tok] {
		return &apiError{http.StatusUnauthorized, "authError", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."}
	}
	if c.denied[rt.method] {
		return &apiError{http.StatusForbidden, "forbidden", fmt.Sprintf("Required '%s' permission for 'projects/%s/%s/%s'",
			permission(rt.method), c.opts.Project, rt.scope, rt.resource)}
	}
	if e := c.serverErrorLocked(rt.method); e != nil {
		return e
	}
	for _, k := range []string{rt.method, ""} {
		if q := c.throttle[k]; len(q) > 0 {
			c.throttle[k] = q[1:]
			return &apiError{q[0], "rateLimitExceeded", fmt.Sprintf("Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com' for consumer 'project_number:%s'.", c.opts.Project)}
		}
	}
	return nil
}

// permission is the IAM permission a method needs.
func permission(method string) string {
	kind, verb, _ := strings.Cut(method, ".")
	// The regional group and template methods share the zonal ones'
	// permissions; regionOperations has its own.
	if k := strings.TrimPrefix(kind, "region"); k == "InstanceGroupManagers" || k == "InstanceTemplates" {
		kind = strings.ToLower(k[:1]) + k[1:]
	}
	switch verb {
	case "get", "listManagedInstances", "getGuestAttributes":
		if verb == "getGuestAttributes" {
			return "compute.instances.getGuestAttributes"
		}
		return "compute." + kind + ".get"
	}
	return "compute." + kind + ".update"
}

// call runs the method.
func (c *Cloud) call(r *http.Request, rt route) (any, *apiError) {
	switch {
	case strings.HasSuffix(rt.method, "nstanceGroupManagers.get"),
		strings.HasSuffix(rt.method, "nstanceGroupManagers.listManagedInstances"),
		strings.HasSuffix(rt.method, "nstanceGroupManagers.resize"),
		strings.HasSuffix(rt.method, "nstanceGroupManagers.deleteInstances"),
		strings.HasSuffix(rt.method, "nstanceGroupManagers.suspendInstances"),
		strings.HasSuffix(rt.method, "nstanceGroupManagers.resumeInstances"):
		return c.callGroup(r, rt)
	case rt.method == "instances.get":
		in, err := c.instanceLocked(rt.scope, rt.resource)
		if err != nil {
			return nil, err
		}
		return c.instanceJSON(in), nil
	case rt.method == "instances.getGuestAttributes":
		return c.guestAttributes(r, rt)
	case rt.method == "zoneOperations.get", rt.method == "regionOperations.get":
		op, ok := c.ops[rt.resource]
		if !ok || op.scope != rt.scope {
			return nil, notFound("The resource 'projects/%s/%s/operations/%s' was not found", c.opts.Project, rt.scope, rt.resource)
		}
		return c.operationJSON(op), nil
	case rt.method == "instanceTemplates.get", rt.method == "regionInstanceTemplates.get":
		if rt.resource != c.group.template || rt.scope != c.group.templateScope {
			return nil, notFound("The resource 'projects/%s/%s/instanceTemplates/%s' was not found", c.opts.Project, rt.scope, rt.resource)
		}
		return c.templateJSON(), nil
	case rt.method == "machineTypes.get":
		return machineTypeJSON(rt.scope, rt.resource)
	}
	return nil, notFound("gcpfake does not implement %s", rt.method)
}

// page cuts n items at pageToken to maxResults (default 500, capped by
// PageSize), returning the next token, "" on the last page.
func (c *Cloud) page(r *http.Request, n int) (start, end int, next string, err *apiError) {
	q := r.URL.Query()
	if tok := q.Get("pageToken"); tok != "" {
		b, derr := base64.RawURLEncoding.DecodeString(tok)
		v, aerr := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
		if derr != nil || aerr != nil || v < 0 || v > n {
			return 0, 0, "", badRequest("Invalid value for field 'pageToken': '%s'", tok)
		}
		start = v
	}
	max := 500
	if s := q.Get("maxResults"); s != "" {
		v, perr := strconv.Atoi(s)
		if perr != nil || v < 0 || v > 500 {
			return 0, 0, "", badRequest("Invalid value for field 'maxResults': '%s'. Must be between 0 and 500", s)
		}
		if v > 0 {
			max = v
		}
	}
	if c.opts.PageSize > 0 && c.opts.PageSize < max {
		max = c.opts.PageSize
	}
	end = n
	if start+max < n {
		end = start + max
		next = base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(end)))
	}
	return start, end, next, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}
