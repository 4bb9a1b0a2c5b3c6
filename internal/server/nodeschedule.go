package server

import (
	"context"

	"github.com/idlegrid/idlegrid"
)

// NodeSchedule returns when one of the caller's nodes is offered: the
// schedule in force, its owner's and its agent's. Admins see any node's.
func (s *Server) NodeSchedule(ctx context.Context, nodeID string) (*idlegrid.NodeSchedule, error) {
	if _, err := s.ownNode(ctx, nodeID); err != nil {
		return nil, err
	}
	return s.store.FindNodeSchedule(ctx, nodeID)
}

// SetNodeSchedule sets the schedule of one of the caller's nodes, which
// replaces whatever its agent publishes until the owner removes it (sched
// nil), when the agent's applies again. Only the node's owner may; an admin
// may look but not decide when a provider's machine is rented out.
func (s *Server) SetNodeSchedule(ctx context.Context, nodeID string, sched *idlegrid.Schedule) (*idlegrid.NodeSchedule, error) {
	c, err := requireUse(ctx, idlegrid.RoleProvider)
	if err != nil {
		return nil, err
	}
	n, err := s.store.FindNode(ctx, nodeID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && n.ProviderID != c.AccountID) {
		return nil, notFound("node", nodeID)
	} else if err != nil {
		return nil, err
	}
	if sched != nil {
		if err := sched.Validate("schedule"); err != nil {
			return nil, err
		}
	}
	ns, err := s.store.SetNodeSchedule(ctx, nodeID, sched, s.Now())
	if err != nil {
		return nil, err
	}
	s.log.Info("node schedule set by its owner", "node", nodeID, "provider", c.AccountID, "mode", ns.Schedule.Mode, "removed", sched == nil)
	s.markNode(nodeID) // the engine must see the new windows
	s.lookSoon(nodeID) // and the uptime measure
	return ns, nil
}
