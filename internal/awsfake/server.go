package awsfake

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

const (
	asgVersion = "2011-01-01"
	asgXMLNS   = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
	ec2Version = "2016-11-15"
	ec2XMLNS   = "http://ec2.amazonaws.com/doc/2016-11-15/"
	eicTarget  = "AWSEC2InstanceConnectService."
)

// apiError is a service error: its code, message and HTTP status.
type apiError struct {
	status        int
	code, message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func validation(format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, "ValidationError", fmt.Sprintf(format, a...)}
}

func ec2Err(code, format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, code, fmt.Sprintf(format, a...)}
}

// ServeHTTP routes a request to Auto Scaling, EC2 or EC2 Instance Connect,
// by its Version (query protocols) or X-Amz-Target (JSON) as AWS's
// endpoints would by host name.
func (c *Cloud) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if target := r.Header.Get("X-Amz-Target"); strings.HasPrefix(target, eicTarget) {
		c.serveEIC(w, r, strings.TrimPrefix(target, eicTarget))
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action, version := r.PostForm.Get("Action"), r.PostForm.Get("Version")
	if r.Method != http.MethodPost || action == "" {
		http.Error(w, "awsfake: want a POST with Action and Version in a form body", http.StatusBadRequest)
		return
	}
	switch version {
	case asgVersion:
		body, err := c.callASG(r, action)
		if err != nil {
			writeASGError(w, err)
			return
		}
		writeXML(w, http.StatusOK, body)
	case ec2Version:
		body, err := c.callEC2(r, action)
		if err != nil {
			writeEC2Error(w, err)
			return
		}
		writeXML(w, http.StatusOK, body)
	default:
		http.Error(w, "awsfake: unknown Version "+version, http.StatusBadRequest)
	}
}

// gate does what every call does first: count it, check that it is signed,
// that the caller may make it, and that it is not throttled.
func (c *Cloud) gate(r *http.Request, service, action string) *apiError {
	c.calls[action]++
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=") {
		return &apiError{http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token"}
	}
	if c.denied[action] {
		code, status := "AccessDenied", http.StatusForbidden
		switch service {
		case "ec2":
			code = "UnauthorizedOperation"
		case "ec2-instance-connect":
			code = "AccessDeniedException"
		}
		return &apiError{status, code, fmt.Sprintf("User: arn:aws:iam::123456789012:user/berth is not authorized to perform: %s:%s because no identity-based policy allows the %s:%s action", service, action, service, action)}
	}
	for _, k := range []string{action, ""} {
		if c.throttle[k] > 0 {
			c.throttle[k]--
			if service == "ec2" {
				return &apiError{http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded."}
			}
			return &apiError{http.StatusBadRequest, "Throttling", "Rate exceeded"}
		}
	}
	return nil
}

func writeXML(w http.ResponseWriter, status int, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	w.Write([]byte(xml.Header))
	w.Write(b)
}

func writeASGError(w http.ResponseWriter, err *apiError) {
	type errBody struct {
		Type    string
		Code    string
		Message string
	}
	writeXML(w, err.status, struct {
		XMLName   xml.Name `xml:"ErrorResponse"`
		NS        string   `xml:"xmlns,attr"`
		Error     errBody
		RequestID string `xml:"RequestId"`
	}{NS: asgXMLNS, Error: errBody{"Sender", err.code, err.message}, RequestID: requestID()})
}

func writeEC2Error(w http.ResponseWriter, err *apiError) {
	type errBody struct {
		Code    string
		Message string
	}
	writeXML(w, err.status, struct {
		XMLName   xml.Name  `xml:"Response"`
		Errors    []errBody `xml:"Errors>Error"`
		RequestID string    `xml:"RequestID"`
	}{Errors: []errBody{{err.code, err.message}}, RequestID: requestID()})
}

func writeJSONError(w http.ResponseWriter, err *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", err.code)
	w.WriteHeader(err.status)
	json.NewEncoder(w).Encode(map[string]string{"__type": err.code, "Message": err.message})
}

func requestID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// list reads a query-protocol list: prefix.1, prefix.2, ... (EC2's flat
// lists) or prefix.member.1, ... (Auto Scaling's).
func list(form url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// page cuts items[start:] to at most max (and the cloud's PageSize) items,
// returning the next token, "" on the last page. Tokens are opaque to
// callers, as AWS's are.
func (c *Cloud) page(n int, token string, max int) (start, end int, next string, err *apiError) {
	if token != "" {
		b, derr := base64.RawURLEncoding.DecodeString(token)
		v, aerr := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
		if derr != nil || aerr != nil || v < 0 || v > n {
			return 0, 0, "", &apiError{http.StatusBadRequest, "InvalidNextToken", "The token " + token + " is invalid."}
		}
		start = v
	}
	if c.opts.PageSize > 0 && (max == 0 || c.opts.PageSize < max) {
		max = c.opts.PageSize
	}
	end = n
	if max > 0 && start+max < n {
		end = start + max
		next = base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(end)))
	}
	return start, end, next, nil
}

func intParam(form url.Values, name string) (int, bool, *apiError) {
	s := form.Get(name)
	if s == "" {
		return 0, false, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, false, validation("Value '%s' at '%s' failed to satisfy constraint: Member must be an integer", s, name)
	}
	return v, true, nil
}
