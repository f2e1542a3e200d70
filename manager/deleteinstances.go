package manager

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/fleet"
)

// serveDeleteInstances is POST /api/v1/instances/delete: an operator
// removes instances (`berth instances delete`), by the rules of
// scaler.Scaler.DeleteInstance. Only the admin may: instances are shared.
func (m *Manager) serveDeleteInstances(w http.ResponseWriter, r *http.Request) {
	if !api.PrincipalFrom(r.Context()).Admin {
		api.WriteError(w, http.StatusForbidden, "only the admin token may delete instances: they run every submitter's jobs")
		return
	}
	var req api.DeleteInstancesRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("read the request: %v; send {\"ids\": [\"ID\", ...]} or {\"all\": true}, and \"force\": true to delete instances in use", err))
		return
	}
	if req.Hold != nil && !*req.Hold && !req.All && len(req.IDs) == 0 {
		m.holdIdlePool(w, false)
		return
	}
	if req.All == (len(req.IDs) > 0) {
		api.WriteError(w, http.StatusBadRequest, "name the instances to delete (\"ids\") or ask for all of them (\"all\": true), not both and not neither")
		return
	}
	ids := req.IDs
	if req.All {
		ids = nil
		for _, v := range m.fleet.Instances() {
			if v.Phase != "deleting" {
				ids = append(ids, v.ID)
			}
		}
	}
	if req.Hold != nil && *req.Hold {
		// Before the deletes: the refill they trigger must see the hold.
		if err := m.fleet.Hold(true); err != nil {
			api.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("hold the idle pool: %v", err))
			return
		}
		m.log.Info("idle pool held by an operator: no idle instance until released (berth instances delete --release) or berth stops")
	}
	results, err := m.fleet.DeleteInstances(ids, req.Force)
	if err != nil {
		api.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("delete instances: %v", err))
		return
	}
	out := api.DeleteInstancesResult{Instances: make([]api.DeletedInstance, 0, len(results))}
	for _, d := range results {
		m.log.Info("instance delete asked by an operator", "instance", d.ID, "outcome", d.Outcome, "why", d.Why, "force", req.Force)
		out.Instances = append(out.Instances, api.DeletedInstance{ID: d.ID, Outcome: d.Outcome, Why: d.Why})
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// holdIdlePool answers a request that only holds or releases the idle pool.
func (m *Manager) holdIdlePool(w http.ResponseWriter, held bool) {
	if err := m.fleet.Hold(held); err != nil {
		api.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("release the idle pool: %v", err))
		return
	}
	m.log.Info("idle pool released by an operator: the policy applies again")
	api.WriteJSON(w, http.StatusOK, api.DeleteInstancesResult{Instances: []api.DeletedInstance{}})
}

// logKeptInstances says at stop, in one line, how many instances keep
// running after berth (by design: the next start takes them back, and a
// parked environment survives) and how to remove them.
func (m *Manager) logKeptInstances(f *fleet.Fleet) {
	msg, ids := keptInstances(f)
	m.log.Info(msg, "instances", strings.Join(ids, ","))
}

// keptInstances is the stop line and the instances it counts: every one
// not being deleted.
func keptInstances(f *fleet.Fleet) (string, []string) {
	var ids []string
	for _, v := range f.Instances() {
		if v.Phase != "deleting" {
			ids = append(ids, v.ID)
		}
	}
	if len(ids) == 0 {
		return "stopped: no instance keeps running", nil
	}
	return fmt.Sprintf("stopped: %d instance(s) keep running (the next start of berth takes them back); "+
		"to remove them, run `berth instances delete --all` while berth runs, "+
		"or set autoscaler.delete_instances_on_shutdown = true to delete idle ones at every stop", len(ids)), ids
}
