package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/idlegrid/idlegrid"
)

// Hardware attestation, challenges and quarantine (docs/trust.md).

// Attest sends the node's signed hardware fingerprint
// (nodekey.SignAttestation). The answer lists what changed since the last
// one and the challenges issued now.
func (a *AgentClient) Attest(ctx context.Context, att idlegrid.Attestation) (*idlegrid.AttestResponse, error) {
	var out idlegrid.AttestResponse
	err := a.do(ctx, call{method: http.MethodPost, path: path("agent", "attestation"),
		in: idlegrid.AttestRequest{Attestation: att}, out: &out}, false)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// PendingChallenges lists the node's challenges that wait for an answer.
func (a *AgentClient) PendingChallenges(ctx context.Context) ([]*idlegrid.Challenge, error) {
	var out idlegrid.ChallengesResponse
	if err := a.do(ctx, call{method: http.MethodGet, path: path("agent", "challenges"), out: &out}, false); err != nil {
		return nil, err
	}
	return out.Challenges, nil
}

// AnswerChallenge sends the node's answer to a challenge and returns the
// challenge as judged.
func (a *AgentClient) AnswerChallenge(ctx context.Context, id string, ans idlegrid.ChallengeAnswer) (*idlegrid.Challenge, error) {
	if err := requireID("challenge_id", id); err != nil {
		return nil, err
	}
	var out idlegrid.Challenge
	if err := a.do(ctx, call{method: http.MethodPost, path: path("agent", "challenges", id, "answer"), in: ans, out: &out}, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// NodeAttestation returns one of the caller's nodes' hardware record:
// fingerprints, changes, challenges and quarantines. Owners and admins.
func (c *Client) NodeAttestation(ctx context.Context, nodeID string) (*idlegrid.NodeAttestationView, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	var out idlegrid.NodeAttestationView
	if err := c.do(ctx, call{method: http.MethodGet, path: path("nodes", nodeID, "attestation"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ChallengeNode issues a hardware challenge to each of a node's GPUs. Admins only.
func (c *Client) ChallengeNode(ctx context.Context, nodeID string) ([]*idlegrid.Challenge, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	var out idlegrid.ChallengesResponse
	if err := c.do(ctx, call{method: http.MethodPost, path: path("nodes", nodeID, "challenge"), in: struct{}{}, out: &out}); err != nil {
		return nil, err
	}
	return out.Challenges, nil
}

// QuarantineNode quarantines a node with a reason. Admins only.
func (c *Client) QuarantineNode(ctx context.Context, nodeID, reason string) (*idlegrid.Quarantine, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	body := struct {
		Reason string `json:"reason"`
	}{reason}
	var out idlegrid.Quarantine
	if err := c.do(ctx, call{method: http.MethodPost, path: path("nodes", nodeID, "quarantine"), in: body, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// LiftQuarantine ends a node's quarantine, with a note for the record. Admins only.
func (c *Client) LiftQuarantine(ctx context.Context, nodeID, note string) (*idlegrid.Quarantine, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	var out idlegrid.Quarantine
	err := c.do(ctx, call{method: http.MethodPost, path: path("nodes", nodeID, "quarantine", "lift"),
		in: idlegrid.LiftQuarantineRequest{Note: note}, out: &out})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListQuarantines lists quarantines, newest first: those in force, or all
// with all. Admins see every node's, providers their own nodes'. It reads
// the first page; ListQuarantinesPage reads any.
func (c *Client) ListQuarantines(ctx context.Context, all bool) ([]*idlegrid.Quarantine, error) {
	return c.ListQuarantinesPage(ctx, idlegrid.QuarantineFilter{ActiveOnly: !all})
}

// ListQuarantinesPage lists a page of quarantines, newest first: those in
// force (f.ActiveOnly) or all, at most f.Limit, after f.Before when it is
// set (the last of the page before). The server narrows them to the
// caller's, as for ListQuarantines; f's node and provider are not sent.
func (c *Client) ListQuarantinesPage(ctx context.Context, f idlegrid.QuarantineFilter) ([]*idlegrid.Quarantine, error) {
	q := url.Values{}
	if !f.ActiveOnly {
		q.Set("state", "all")
	}
	setString(q, "before", f.Before)
	setInt(q, "limit", int64(f.Limit))
	var out []*idlegrid.Quarantine
	if err := c.do(ctx, call{method: http.MethodGet, path: path("quarantine"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return out, nil
}

// ListChallenges lists a node's hardware challenges, newest first: those
// in f.States (all when empty), at most f.Limit, after f.Before when it is
// set (the last of the page before). Its owner and admins; f.NodeID is
// not sent, nodeID names the node.
func (c *Client) ListChallenges(ctx context.Context, nodeID string, f idlegrid.ChallengeFilter) ([]*idlegrid.Challenge, error) {
	if err := requireID("node_id", nodeID); err != nil {
		return nil, err
	}
	q := url.Values{}
	setList(q, "state", f.States)
	setString(q, "before", f.Before)
	setInt(q, "limit", int64(f.Limit))
	var out idlegrid.ChallengesResponse
	if err := c.do(ctx, call{method: http.MethodGet, path: path("nodes", nodeID, "challenges"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return out.Challenges, nil
}
