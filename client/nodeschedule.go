package client

import (
	"context"
	"net/http"

	"github.com/idlegrid/idlegrid"
)

// NodeSchedule returns when one of the caller's nodes is offered: the
// schedule in force, the owner's (if set) and the one its agent publishes.
func (c *Client) NodeSchedule(ctx context.Context, nodeID string) (*idlegrid.NodeSchedule, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	var out idlegrid.NodeSchedule
	if err := c.do(ctx, call{method: http.MethodGet, path: path("nodes", nodeID, "schedule"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetNodeSchedule sets the schedule of one of the caller's nodes; it
// replaces what the node's agent publishes until RemoveNodeSchedule.
// Providers only, for their own nodes.
func (c *Client) SetNodeSchedule(ctx context.Context, nodeID string, s idlegrid.Schedule) (*idlegrid.NodeSchedule, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	body := struct {
		Schedule idlegrid.Schedule `json:"schedule"`
	}{s}
	var out idlegrid.NodeSchedule
	if err := c.do(ctx, call{method: http.MethodPut, path: path("nodes", nodeID, "schedule"), in: body, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemoveNodeSchedule removes the owner's schedule of a node, so that the
// one its agent publishes applies again.
func (c *Client) RemoveNodeSchedule(ctx context.Context, nodeID string) (*idlegrid.NodeSchedule, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	var out idlegrid.NodeSchedule
	if err := c.do(ctx, call{method: http.MethodDelete, path: path("nodes", nodeID, "schedule"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
