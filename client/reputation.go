package client

import (
	"context"
	"net/http"

	"github.com/idlegrid/idlegrid"
)

// NodeReputation returns a node's reputation: score, level and badges to
// anyone signed in; with Detail (the evidence, facts, level history and
// advice) to the node's provider and admins.
func (c *Client) NodeReputation(ctx context.Context, nodeID string) (*idlegrid.ReputationView, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	var out idlegrid.ReputationView
	if err := c.do(ctx, call{method: http.MethodGet, path: path("nodes", nodeID, "reputation"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ProviderReputation returns a provider's reputation, its nodes' evidence
// pooled; Detail as for NodeReputation.
func (c *Client) ProviderReputation(ctx context.Context, providerID string) (*idlegrid.ReputationView, error) {
	if err := requireID("provider_id", providerID); err != nil {
		return nil, err
	}
	var out idlegrid.ReputationView
	if err := c.do(ctx, call{method: http.MethodGet, path: path("providers", providerID, "reputation"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// TrustPolicy returns the trust policy in force: its version, the formula,
// the levels and the level gold jobs need.
func (c *Client) TrustPolicy(ctx context.Context) (*idlegrid.TrustPolicyView, error) {
	var out idlegrid.TrustPolicyView
	if err := c.do(ctx, call{method: http.MethodGet, path: path("trust-policy"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
