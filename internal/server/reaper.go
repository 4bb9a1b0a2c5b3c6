package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// runReaper ends what has gone quiet: nodes that miss heartbeats, leases
// their agent never started, and leases that outrun their time limit.
func (s *Server) runReaper(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.HeartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if err := s.Reap(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("reap", "err", err)
		}
	}
}

// limitGrace is how long past its time limit a lease may run before the
// server asks its agent to stop it. The renter is never charged past the limit.
const limitGrace = 30 * time.Second

// Reap runs one round of the reaper: it also matures earnings past the
// payout hold and stops leases before their renter's money runs out.
func (s *Server) Reap(ctx context.Context) error {
	if err := s.reapNodes(ctx); err != nil {
		return err
	}
	if err := s.reapLeases(ctx); err != nil {
		return err
	}
	return errors.Join(s.matureEarnings(ctx), s.checkRunout(ctx), s.measureUptime(ctx))
}

// reapNodes declares lost the nodes that missed too many heartbeats and ends
// their live leases as the provider's fault, which requeues their jobs.
func (s *Server) reapNodes(ctx context.Context) error {
	now := s.Now()
	silence := time.Duration(s.cfg.MissedHeartbeats) * s.cfg.HeartbeatInterval
	nodes, err := s.store.ListNodes(ctx, idlegrid.NodeFilter{States: []idlegrid.NodeState{idlegrid.NodeOnline}})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if now.Sub(n.LastHeartbeat) <= silence {
			continue
		}
		if err := s.store.SetNodeState(ctx, n.ID, idlegrid.NodeLost, now); err != nil {
			return err
		}
		s.markNode(n.ID)
		reason := fmt.Sprintf("node %s missed %d heartbeats", n.Name, s.cfg.MissedHeartbeats)
		s.log.Warn("node lost", "node", n.ID, "reason", reason)
		leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{NodeID: n.ID, States: liveLeaseStates})
		if err != nil {
			return err
		}
		for _, l := range leases {
			if err := s.endLease(ctx, l, leaseEnd{to: idlegrid.LeaseLost, reason: reason, fault: idlegrid.FaultProvider}); err != nil &&
				idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
				return err
			}
		}
	}
	return nil
}

// noticeExpired reports whether a bronze lease given notice is still live
// well past the end of its notice.
func noticeExpired(l *idlegrid.Lease, now time.Time) bool {
	return strings.HasPrefix(l.StopRequested, noticePrefix) && l.NoticeAt != nil &&
		now.Sub(*l.NoticeAt) > time.Duration(l.NoticeSeconds)*time.Second+limitGrace
}

// reapLeases ends leases that were never started and asks agents to stop
// leases past their time limit.
func (s *Server) reapLeases(ctx context.Context) error {
	now := s.Now()
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{States: liveLeaseStates, Limit: everyRow})
	if err != nil {
		return err
	}
	for _, l := range leases {
		var err error
		switch {
		case l.State == idlegrid.LeaseAssigned && now.Sub(l.CreatedAt) > s.cfg.StartTimeout:
			err = s.endLease(ctx, l, leaseEnd{to: idlegrid.LeaseLost, fault: idlegrid.FaultProvider,
				reason: fmt.Sprintf("the node did not start the lease within %s", s.cfg.StartTimeout)})
		case noticeExpired(l, now):
			// The node did not confirm the stop within the notice. The renter
			// pays for what ran; the job is requeued.
			err = s.endLease(ctx, l, leaseEnd{to: idlegrid.LeasePreempted,
				reason: strings.TrimPrefix(l.StopRequested, noticePrefix) + "; the node did not confirm the stop within the notice"})
		case l.State == idlegrid.LeaseRunning && l.StopRequested == "" && l.StartedAt != nil &&
			now.Sub(*l.StartedAt) > time.Duration(l.LimitSeconds)*time.Second+limitGrace:
			err = s.stopLease(ctx, l, fmt.Sprintf("time limit of %ds reached", l.LimitSeconds))
		}
		if err != nil && idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			return err
		}
	}
	return nil
}
