package gcpfake

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// operation is a long-running operation: RUNNING until doneAt, then DONE,
// with an error when FailOperations asked for one.
type operation struct {
	name, scope, opType, target string
	id                          uint64
	start, doneAt               time.Time
	failed                      bool
}

func (c *Cloud) newOperation(rt route) *operation {
	now := c.now()
	op := &operation{name: "operation-" + strconv.FormatInt(now.UnixMilli(), 10) + "-" + randomHex(8), scope: rt.scope,
		opType: "compute." + rt.method, target: c.groupLink(), id: uint64(len(c.ops) + 1), start: now, doneAt: now.Add(c.opts.OperationTime)}
	if c.failOps[rt.method] > 0 {
		c.failOps[rt.method]--
		op.failed = true
	}
	c.ops[op.name] = op
	return op
}

// operationJSON is the Operation resource as Compute Engine returns it.
func (c *Cloud) operationJSON(op *operation) map[string]any {
	out := map[string]any{
		"kind": "compute#operation", "id": strconv.FormatUint(op.id, 10), "name": op.name, "operationType": op.opType,
		"targetLink": op.target, "status": "RUNNING", "progress": 0, "insertTime": op.start.Format(time.RFC3339Nano),
		"selfLink": selfLinkBase + "projects/" + c.opts.Project + "/" + op.scope + "/operations/" + op.name,
	}
	scopeLink := selfLinkBase + "projects/" + c.opts.Project + "/" + op.scope
	if strings.HasPrefix(op.scope, "zones/") {
		out["zone"] = scopeLink
	} else {
		out["region"] = scopeLink
	}
	if !c.now().Before(op.doneAt) {
		out["status"], out["progress"], out["endTime"] = "DONE", 100, op.doneAt.Format(time.RFC3339Nano)
		if op.failed {
			out["httpErrorStatusCode"] = http.StatusForbidden
			out["httpErrorMessage"] = "FORBIDDEN"
			out["error"] = map[string]any{"errors": []map[string]string{{"code": "QUOTA_EXCEEDED",
				"message": "Quota 'CPUS' exceeded. Limit: 24.0 in region " + c.opts.Zone + "."}}}
		}
	}
	return out
}
