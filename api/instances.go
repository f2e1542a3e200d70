package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// DeleteInstancesRequest is the body of POST /api/v1/instances/delete
// (admin only): the instances to delete, by ID or All of them.
//
// The rules are berth's own (docs/semantics.md, "Deleting instances by
// hand"): an instance that holds nothing is deleted at once; one that
// runs a job, holds a booking or a parked environment is kept, with why,
// unless Force. With Force a parked environment is dropped and an
// instance with running jobs drains: it takes no new job and is deleted
// when they end. No running job is killed.
//
// Hold, when set, stops (true) or restarts (false) the idle pool: held,
// berth keeps no idle instance whatever the policy says and boots one only
// for a job that comes, until released or until berth stops. With
// "all": true and "hold": true the fleet stops at zero; {"hold": false}
// alone releases it.
type DeleteInstancesRequest struct {
	IDs   []string `json:"ids,omitempty"`
	All   bool     `json:"all,omitempty"`
	Force bool     `json:"force,omitempty"`
	Hold  *bool    `json:"hold,omitempty"`
}

// Outcomes of deleting an instance (DeletedInstance.Outcome).
const (
	// InstanceDeleting: the instance is being deleted.
	InstanceDeleting = "deleting"
	// InstanceDraining: it takes no new job and is deleted when its
	// running jobs end.
	InstanceDraining = "draining"
	// InstanceKept: it holds a job, a booking or a parked environment
	// and the request did not force; Why says which.
	InstanceKept = "kept"
	// InstanceUnknown: no instance with this ID in the fleet.
	InstanceUnknown = "unknown"
)

// DeletedInstance is what became of one instance.
type DeletedInstance struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	Why     string `json:"why,omitempty"`
}

// DeleteInstancesResult is the answer to POST /api/v1/instances/delete,
// one entry per instance asked for (every instance for All).
type DeleteInstancesResult struct {
	Instances []DeletedInstance `json:"instances"`
}

// DeleteInstances asks the server to delete instances.
func (c *Client) DeleteInstances(ctx context.Context, req DeleteInstancesRequest) (DeleteInstancesResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return DeleteInstancesResult{}, fmt.Errorf("encode delete request: %w", err)
	}
	var r DeleteInstancesResult
	err = c.do(ctx, http.MethodPost, "/api/v1/instances/delete", body, &r)
	return r, err
}

// ReloadResult is the answer to POST /api/v1/config/reload: the settings
// the reload applied, and those that changed in the file but take effect
// only when berth restarts.
type ReloadResult struct {
	Applied      []string `json:"applied"`
	NeedsRestart []string `json:"needs_restart"`
}

// ReloadConfig asks the server to read its config file again.
func (c *Client) ReloadConfig(ctx context.Context) (ReloadResult, error) {
	var r ReloadResult
	err := c.do(ctx, http.MethodPost, "/api/v1/config/reload", []byte("{}"), &r)
	return r, err
}
