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
	ns, err := s.setNodeSchedule(ctx, c.AccountID, nodeID, sched)
	if err != nil {
		return nil, err
	}
	s.log.Info("node schedule set by its owner", "node", nodeID, "provider", c.AccountID, "mode", ns.Schedule.Mode, "removed", sched == nil)
	s.markNode(nodeID) // the engine must see the new windows
	s.lookSoon(nodeID) // and the uptime measure
	return ns, nil
}

// setNodeSchedule sets the owner's schedule of provider providerID's node
// nodeID. When that changes the schedule in force, the node's uptime is
// first measured up to now under the schedule it replaces
// (measureBeforeSchedule).
func (s *Server) setNodeSchedule(ctx context.Context, providerID, nodeID string, sched *idlegrid.Schedule) (*idlegrid.NodeSchedule, error) {
	s.trust.mmu.Lock()
	defer s.trust.mmu.Unlock()
	n, err := s.store.FindNode(ctx, nodeID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && n.ProviderID != providerID) {
		return nil, notFound("node", nodeID)
	} else if err != nil {
		return nil, err
	}
	if sched != nil {
		if err := sched.Validate("schedule"); err != nil {
			return nil, err
		}
	}
	cur, err := s.store.FindNodeSchedule(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	if err := s.measureBeforeSchedule(ctx, n, idlegrid.EffectiveSchedule(cur.Published, sched, now), now); err != nil {
		return nil, err
	}
	return s.store.SetNodeSchedule(ctx, nodeID, sched, now)
}
