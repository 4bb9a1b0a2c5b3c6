package client

import (
	"context"
	"net/http"

	"github.com/idlegrid/idlegrid"
)

// DrainNode starts draining one of the caller's nodes for maintenance (on)
// or ends the drain, and returns the node: a draining node takes no new
// leases, its bronze leases get their notice and its gold and silver
// leases run to their end. Its provider and admins may.
func (c *Client) DrainNode(ctx context.Context, nodeID string, on bool) (*idlegrid.Node, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	method := http.MethodPut
	if !on {
		method = http.MethodDelete
	}
	var out idlegrid.Node
	if err := c.do(ctx, call{method: method, path: path("nodes", nodeID, "drain"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// RetireNode takes a node out of the market for good: its key is refused
// from then on and its leases end, their jobs requeued. Its provider and
// admins may.
func (c *Client) RetireNode(ctx context.Context, nodeID string) (*idlegrid.Node, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	var out idlegrid.Node
	if err := c.do(ctx, call{method: http.MethodPost, path: path("nodes", nodeID, "retire"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
