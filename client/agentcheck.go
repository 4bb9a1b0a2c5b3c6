package client

import (
	"context"
	"net/http"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// Node returns the node's own record, as the server keeps it: what
// `idlegrid agent --check` shows of a node that has joined.
func (a *AgentClient) Node(ctx context.Context) (*idlegrid.Node, error) {
	var out idlegrid.Node
	if err := a.do(ctx, call{method: http.MethodGet, path: path("agent", "node"), out: &out}, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// CheckJoinToken returns the join token whose secret is token when a node
// could join with it now, without using it; an error saying why not (it is
// unknown, revoked, expired or used up) otherwise. The secret is the
// credential: c needs no API key.
func (c *Client) CheckJoinToken(ctx context.Context, token string) (*idlegrid.JoinToken, error) {
	var out wire.JoinTokenChecked
	err := c.do(ctx, call{method: http.MethodPost, path: path("agent", "join-tokens", "check"),
		in: wire.JoinTokenCheck{Token: token}, out: &out})
	if err != nil {
		return nil, err
	}
	return out.JoinToken, nil
}
