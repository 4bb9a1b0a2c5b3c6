package server

import (
	"context"
	"errors"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// DrainNode starts draining one of the caller's nodes for maintenance
// (on), or ends the drain. A draining node takes no new leases and holds
// no reservations; its bronze leases get their notice at once, and its
// gold and silver leases run to their end, so that the node empties
// without breaking a guarantee. It lasts, whatever the agent publishes,
// until undone. Its owner may drain it, and so may an admin.
func (s *Server) DrainNode(ctx context.Context, nodeID string, on bool) (*idlegrid.Node, error) {
	if _, err := requireUse(ctx); err != nil {
		return nil, err
	}
	if _, err := s.ownNode(ctx, nodeID); err != nil {
		return nil, err
	}
	var since *time.Time
	if on {
		now := s.Now()
		since = &now
	}
	n, err := s.store.SetNodeDraining(ctx, nodeID, since)
	if err != nil {
		return nil, err
	}
	c, _ := account(ctx)
	s.log.Info("node drain", "node", nodeID, "draining", on, "by", c.AccountID)
	s.markNode(nodeID) // the engine must close it, or open it again
	return n, nil
}

// RetireNode takes a node out of the market for good, for its provider or
// an admin: a machine given up, or one whose key may have leaked. Its key
// is refused from now on (NodeIdentity), and its live leases end as the
// provider's fault, their jobs requeued, in this call or, should one fail,
// the reaper's next pass. A machine that is to serve again joins as a new
// node. Retiring is for good, like revoking a key, so it takes a key that
// may manage the account.
func (s *Server) RetireNode(ctx context.Context, nodeID string) (*idlegrid.Node, error) {
	if _, err := requireManage(ctx); err != nil {
		return nil, err
	}
	n, err := s.ownNode(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	if n.State != idlegrid.NodeRetired {
		if err := s.store.SetNodeState(ctx, nodeID, idlegrid.NodeRetired, s.Now()); err != nil && idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			return nil, err
		}
		c, _ := account(ctx)
		s.log.Warn("node retired", "node", nodeID, "by", c.AccountID)
		s.markNode(nodeID)
	}
	if n, err = s.store.FindNode(ctx, nodeID); err != nil {
		return nil, err
	}
	if err := s.endNodeLeases(ctx, n); err != nil {
		s.log.Error("end the retired node's leases; the reaper tries again", "node", nodeID, "err", err)
	}
	return n, nil
}

// marketNode is n as the engine is to see it: a draining node closed, so
// that it takes no new leases and its bronze leases get their notice.
func marketNode(n *idlegrid.Node) *idlegrid.Node {
	if n.DrainingSince == nil {
		return n
	}
	closed := *n
	closed.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, TimeZone: n.Schedule.TimeZone}
	return &closed
}

// drainNotices gives each live bronze lease on draining node n its notice,
// once, saying why. (The engine would give it too, at the pass's Advance,
// as to any node closed now, but in the words of a window; after a
// restart it is the engine's.) Gold and silver leases run to their end.
func (s *Server) drainNotices(ctx context.Context, e *market.Engine, n *idlegrid.Node) error {
	if n.DrainingSince == nil {
		return nil
	}
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{NodeID: n.ID, States: liveLeaseStates, Limit: everyRow})
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range leases {
		if l.Tier == idlegrid.TierBronze && l.StopRequested == "" {
			errs = append(errs, s.giveNotice(ctx, e, l.ID, "node "+n.Name+" is draining for maintenance"))
		}
	}
	return errors.Join(errs...)
}
