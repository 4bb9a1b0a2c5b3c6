package server

import (
	"context"

	"github.com/idlegrid/idlegrid"
)

// What `idlegrid agent --check` asks the server before an agent starts,
// changing nothing: whether the node it joined is known, and whether its
// join token would let it join.

// AgentNode returns the calling node's own record.
func (s *Server) AgentNode(ctx context.Context) (*idlegrid.Node, error) {
	c, err := node(ctx)
	if err != nil {
		return nil, err
	}
	return s.store.FindNode(ctx, c.NodeID)
}

// CheckJoinToken returns the join token whose secret is secret when a node
// could join with it now, without using it; else
// EUNAUTHORIZED saying why (unknown, revoked, expired, used up), as Join
// would.
func (s *Server) CheckJoinToken(ctx context.Context, secret string) (*idlegrid.JoinToken, error) {
	if secret == "" {
		return nil, idlegrid.Invalid("token", "required; ask the provider for a join token (idlegrid token create)")
	}
	t, err := s.store.FindJoinToken(ctx, hashSecret(secret))
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "unknown join token; ask the provider for a new one")
	} else if err != nil {
		return nil, err
	}
	if err := t.Usable(s.Now()); err != nil {
		return nil, err
	}
	return t, nil
}
