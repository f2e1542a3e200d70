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

// operationRetention is how long a finished operation, and the requestId
// that made it, are kept: the API guarantees a retried requestId is
// recognised "for at least 60 minutes since the first request" (Compute
// Engine API reference, the requestId parameter of every mutation). Older
// ones are pruned, so that a long-lived fake's state file does not grow
// without bound. A variable, so tests can shorten it.
var operationRetention = 60 * time.Minute

// pruneOperationsLocked drops the operations finished longer than
// operationRetention ago, and the requestIds that name them.
func (c *Cloud) pruneOperationsLocked(now time.Time) {
	for name, op := range c.ops {
		if now.Sub(op.doneAt) > operationRetention && now.Sub(op.start) > operationRetention {
			delete(c.ops, name)
		}
	}
	for req, name := range c.requests {
		if _, ok := c.ops[name]; !ok {
			delete(c.requests, req)
		}
	}
}

func (c *Cloud) newOperation(rt route) *operation {
	now := c.now()
	c.pruneOperationsLocked(now)
	// Unique after pruning too: above every kept one and the clock's
	// microseconds (Google's operation IDs are opaque numbers).
	id := uint64(now.UnixMicro())
	for _, op := range c.ops {
		id = max(id, op.id)
	}
	op := &operation{name: "operation-" + strconv.FormatInt(now.UnixMilli(), 10) + "-" + randomHex(8), scope: rt.scope,
		opType: "compute." + rt.method, target: c.groupLink(), id: id + 1, start: now, doneAt: now.Add(c.opts.OperationTime)}
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
