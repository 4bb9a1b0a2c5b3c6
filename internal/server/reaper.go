package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// runReaper ends what has gone quiet: nodes that miss heartbeats, leases
// their agent never started, and leases that outrun their time limit.
func (s *Server) runReaper(ctx context.Context) {
	s.every(ctx, s.cfg.HeartbeatInterval, "reap", s.Reap)
}

// every runs pass each period until ctx is done; a pass that fails is
// logged as what, and the next runs on time.
func (s *Server) every(ctx context.Context, period time.Duration, what string, pass func(context.Context) error) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			s.log.Error(what, "err", err)
		}
	}
}

// silentSince is how long the server has not heard what was last heard at
// t: counted from when it opened, at the earliest. A node or lease that was
// silent while the server was down was silent to no one (its agent was
// turned away, and tries again with backoff), so a restart must not
// declare every node lost, or fail every lease, on its first pass.
func (s *Server) silentSince(t, now time.Time) time.Duration {
	return now.Sub(later(t, s.opened))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// limitGrace is how long past its time limit a lease may run before the
// server asks its agent to stop it. The renter is never charged past the limit.
const limitGrace = 30 * time.Second

// Reap runs one round of the reaper: it also matures earnings past the
// payout hold, stops leases before their renter's money runs out, frees
// what has expired (expiry.go), and does again the follow-ups of commits
// that were left undone (followup.go).
//
// While the store's market lock is in doubt (sqlstore.GuardedDB), another
// server may be running the market: the reaper, like placing, waits for
// the lock to be sure again, and the pass does nothing.
func (s *Server) Reap(ctx context.Context) error {
	if err := s.marketDoubt(); err != nil {
		s.log.Warn("reaper pass skipped", "why", err)
		return nil
	}
	beats, err := s.store.OnlineHeartbeats(ctx)
	if err != nil {
		return errors.Join(err, s.reapRest(ctx))
	}
	if err := s.reapNodes(ctx, beats); err != nil {
		return errors.Join(err, s.reapRest(ctx))
	}
	if err := s.reapLeaving(ctx); err != nil {
		return errors.Join(err, s.reapRest(ctx))
	}
	lost := s.endLostLeases(ctx)
	if err := s.reapLeases(ctx, beats); err != nil {
		return errors.Join(lost, err, s.reapRest(ctx))
	}
	return errors.Join(lost, s.measureUptime(ctx, beats), s.reapRest(ctx))
}

// reapRest is the part of a pass that does not rest on the nodes'
// heartbeats, and so is done even when reading or judging them failed.
func (s *Server) reapRest(ctx context.Context) error {
	return errors.Join(s.matureEarnings(ctx), s.checkRunout(ctx), s.sweepExpired(ctx), s.redoFollowUps(ctx), s.closeStalledVerifications(ctx))
}

// marketDoubt is why this server may not be the one running the market
// now, its store's market lock in doubt or lost; nil when it is sure, or
// the store has no lock (a test's).
func (s *Server) marketDoubt() error {
	if d, ok := s.store.(interface{ MarketDoubt() error }); ok {
		return d.MarketDoubt()
	}
	return nil
}

// reapNodes declares lost the nodes that missed too many heartbeats;
// endLostLeases then ends their leases. beats, the online nodes' last
// heartbeats as the pass read them, is kept true for the rest of the
// pass: a node declared lost, or gone since the read, leaves it, and one
// that beat since gets its new heartbeat.
func (s *Server) reapNodes(ctx context.Context, beats map[string]time.Time) error {
	now, silence := s.Now(), s.lostSilence()
	for _, id := range slices.Sorted(maps.Keys(beats)) {
		if s.silentSince(beats[id], now) <= silence {
			continue
		}
		n, err := s.store.FindNode(ctx, id)
		if err != nil {
			return err
		}
		if n.State != idlegrid.NodeOnline {
			delete(beats, id) // it went since the read
			continue
		} else if beats[id] = n.LastHeartbeat; s.silentSince(n.LastHeartbeat, now) <= silence {
			continue // it beat since the read
		}
		if lost, err := s.declareLost(ctx, n.ID, n.LastHeartbeat, lostReason(n, s.cfg.MissedHeartbeats)); err != nil {
			return err
		} else if !lost {
			beats[id] = now // it beat just now
			continue
		}
		delete(beats, id)
	}
	return nil
}

// lostSilence is how long a node may go unheard before it is lost.
func (s *Server) lostSilence() time.Duration {
	return time.Duration(s.cfg.MissedHeartbeats) * s.cfg.HeartbeatInterval
}

// declareLost records node id lost, and tells the engine, unless it has
// beaten since lastBeat, the last heartbeat the caller saw, or was
// retired: the store declares it lost only then. It reports whether it
// did.
func (s *Server) declareLost(ctx context.Context, id string, lastBeat time.Time, reason string) (bool, error) {
	err := s.store.SetNodeState(ctx, id, idlegrid.NodeLost, lastBeat)
	if idlegrid.ErrorCode(err) == idlegrid.ECONFLICT {
		return false, nil
	} else if err != nil {
		return false, err
	}
	s.markNode(id)
	s.log.Warn("node lost", "node", id, "reason", reason)
	return true, nil
}

// reapLeaving declares lost the nodes that said goodbye (Goodbye) and
// then, holding live leases their agents never reported, stayed silent as
// long as reapNodes waits for an online node: endLostLeases then ends
// those leases. A node that beat since it was read is left as it is.
func (s *Server) reapLeaving(ctx context.Context) error {
	leaving, err := s.store.LeavingHeartbeats(ctx)
	if err != nil {
		return err
	}
	now, silence := s.Now(), s.lostSilence()
	for _, id := range slices.Sorted(maps.Keys(leaving)) {
		if s.silentSince(leaving[id], now) > silence {
			if _, err := s.declareLost(ctx, id, leaving[id], "its agent said goodbye and went silent before reporting every lease it ran"); err != nil {
				return err
			}
		}
	}
	return nil
}

func lostReason(n *idlegrid.Node, missed int) string {
	if n.State == idlegrid.NodeRetired {
		return fmt.Sprintf("node %s was retired by its provider", n.Name)
	}
	return fmt.Sprintf("node %s missed %d heartbeats", n.Name, missed)
}

// endLostLeases ends the live leases of every lost or retired node as the
// provider's fault, which requeues their jobs: those of the nodes
// reapNodes has just declared lost (or RetireNode retired), and any that
// an earlier pass left live, because ending it failed or the coordinator
// stopped after changing the node's state. A lease that fails to end is
// left to the next pass; the others end.
func (s *Server) endLostLeases(ctx context.Context) error {
	nodes, err := s.store.ListNodes(ctx, idlegrid.NodeFilter{States: []idlegrid.NodeState{idlegrid.NodeLost, idlegrid.NodeRetired}})
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		errs = append(errs, s.endNodeLeases(ctx, n))
	}
	return errors.Join(errs...)
}

// endNodeLeases ends the live leases of n, lost or retired, as the
// provider's fault; one that fails to end leaves the others to end.
func (s *Server) endNodeLeases(ctx context.Context, n *idlegrid.Node) error {
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{NodeID: n.ID, States: liveLeaseStates})
	if err != nil {
		return fmt.Errorf("leases of %s node %s: %w", n.State, n.ID, err)
	}
	var errs []error
	end := leaseEnd{to: idlegrid.LeaseLost, reason: lostReason(n, s.cfg.MissedHeartbeats), fault: idlegrid.FaultProvider}
	for _, l := range leases {
		if err := s.endLease(ctx, l, end); err != nil && idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			errs = append(errs, fmt.Errorf("lease %s of %s node %s: %w", l.ID, n.State, n.ID, err))
		}
	}
	return errors.Join(errs...)
}

// noticeExpired reports whether a bronze lease given notice is still live
// well past the end of its notice.
func noticeExpired(l *idlegrid.Lease, now time.Time) bool {
	return strings.HasPrefix(l.StopRequested, noticePrefix) && l.NoticeAt != nil &&
		now.Sub(*l.NoticeAt) > time.Duration(l.NoticeSeconds)*time.Second+limitGrace
}

// stopWait is how long past its notice, if it has one, a node has to
// confirm a stop the server asked for that is not a bronze notice (a
// cancel, a time limit): an agent gives the workload StopGrace and
// reports at once.
const stopWait = time.Minute

// stopUnconfirmed reports whether a lease asked to stop, not by a bronze
// notice, is still live past stopWait after its notice (an agent gives a
// bronze lease its notice whatever the stop).
func stopUnconfirmed(l *idlegrid.Lease, now time.Time) bool {
	return l.StopRequested != "" && !strings.HasPrefix(l.StopRequested, noticePrefix) && l.NoticeAt != nil &&
		now.Sub(*l.NoticeAt) > time.Duration(l.NoticeSeconds)*time.Second+stopWait
}

// reapLeases ends leases that were never started (startOverdue), takes
// back leases not started by their start-by (startTooLate), ends as the
// provider's failure running leases whose receipts stopped while their
// node kept heartbeating, asks agents to stop leases past their time
// limit, and ends leases whose stop their node never confirmed. It reads
// only the leases that may need one of those (reapQuery); beats are the
// online nodes' last heartbeats (see reapNodes).
func (s *Server) reapLeases(ctx context.Context, beats map[string]time.Time) error {
	now := s.Now()
	leases, err := s.store.LeasesToReap(ctx, s.reapQuery(now))
	if err != nil {
		return err
	}
	heard := s.heartbeating(beats, now)
	lasts, err := s.lastReceipts(ctx, leases, heard)
	if err != nil {
		return err
	}
	s.starts.forget(now.Add(-2 * s.cfg.StartTimeout)) // kept a while longer, for the reason it gives
	for _, l := range leases {
		overdue, stopped := s.startOverdue(l, now), s.receiptsStopped(l, now, heard, lasts)
		late := ""
		if overdue == "" { // lost anyway: no need to ask what a start now would break
			if late, err = s.startTooLate(ctx, l, now); err != nil {
				return err
			}
		}
		switch {
		case overdue != "":
			err = s.endLease(ctx, l, leaseEnd{to: idlegrid.LeaseLost, fault: idlegrid.FaultProvider, reason: overdue})
		case late != "":
			// Taken back, as a preemption is: no one's fault, nothing
			// ran, and the job is requeued.
			err = s.endLease(ctx, l, leaseEnd{to: idlegrid.LeasePreempted, reason: late})
		case stopped != "":
			// A bronze lease's broken notice counts as a fact
			// (reputation.FactsFromLease); it is not convicted on this
			// inference alone.
			err = s.endLease(ctx, l, leaseEnd{to: idlegrid.LeaseFailed, fault: idlegrid.FaultProvider, reason: stopped})
		case noticeExpired(l, now):
			// The node did not confirm the stop within the notice. The renter
			// pays for what ran; the job is requeued.
			err = s.endLease(ctx, l, leaseEnd{to: idlegrid.LeasePreempted,
				reason: strings.TrimPrefix(l.StopRequested, noticePrefix) + "; the node did not confirm the stop within the notice"})
		case stopUnconfirmed(l, now):
			// It ends as the stop would have: its hold is released and its
			// GPUs go back to the market, whatever the node still runs.
			err = s.endLease(ctx, l, leaseEnd{to: idlegrid.LeaseCancelled,
				reason: l.StopRequested + "; the node did not confirm the stop"})
		case l.State == idlegrid.LeaseRunning && l.StopRequested == "" && l.StartedAt != nil &&
			now.Sub(*l.StartedAt) > time.Duration(l.LimitSeconds)*time.Second+limitGrace:
			// It ends cancelled, paid for up to its limit, and its job
			// fails: it did not finish in its run (idlegrid.LimitStop).
			err = s.stopLease(ctx, l, idlegrid.LimitStop(l))
		}
		if err != nil && idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			return err
		}
	}
	return nil
}

// reapQuery picks the leases reapLeases may act on at now, a superset of
// them: never started for StartTimeout (a lease's StartBy is never
// sooner); past their time limit by limitGrace (a stop, or an overdue
// last receipt, see receiptsStopped); past their notice by limitGrace
// (noticeExpired, and stopUnconfirmed, which waits longer); or with no
// receipt for ReceiptSilence, the least silence receiptsStopped acts on
// (silenceFor).
func (s *Server) reapQuery(now time.Time) idlegrid.ReapQuery {
	return idlegrid.ReapQuery{
		AssignedBefore: now.Add(-s.cfg.StartTimeout),
		LimitBefore:    now.Add(-limitGrace),
		NoticeBefore:   now.Add(-limitGrace),
		ReceiptsBefore: now.Add(-s.cfg.ReceiptSilence),
	}
}

// receiptsStopped says why a running lease counts as abandoned by its
// node, or "" when it does not. The node is heartbeating (a silent node is
// lost by reapNodes), yet the lease's receipts stopped:
//
//   - no receipt for longer than silenceFor (several of the lease's own
//     receipt intervals, at least Config.ReceiptSilence) after its last, or
//   - past its time limit, its last receipt is overdue: older than one of
//     its receipt intervals, one heartbeat interval, limitGrace and the
//     clock skew allowed (the receipt's end is on the node's clock). An
//     agent that runs a lease to its limit has a receipt at most one
//     interval old; one whose receipts stopped long before had stopped
//     working on it, and must not end as a plain cancel when asked to stop.
//
// A lease that already has a stop or a notice pending is the server's
// doing and is left to it. lasts holds the last receipts of the leases
// watched (see lastReceipts).
func (s *Server) receiptsStopped(l *idlegrid.Lease, now time.Time, heard map[string]bool, lasts map[string]*idlegrid.Receipt) string {
	if !receiptsWatched(l, heard) {
		return ""
	}
	last := lasts[l.ID]
	if last == nil {
		// No receipt yet: nothing stopped. Such a lease is paid for
		// NoReceiptCapSeconds at most, whatever it runs.
		return ""
	}
	every := last.End.Sub(last.Start)
	silent := s.silentSince(last.End, now)
	if limit := silenceFor(every, s.cfg.ReceiptSilence); silent > limit {
		return fmt.Sprintf("the node heartbeats but sent no receipt for %s (more than %s): it stopped running the lease",
			silent.Truncate(time.Second), limit)
	}
	pastLimit := now.Sub(*l.StartedAt) > time.Duration(l.LimitSeconds)*time.Second+limitGrace
	// The receipt's end is on the node's clock, which may be behind the
	// server's by up to nodekey.MaxSkew, as abandonedBeforeStop allows.
	if overdue := every + s.cfg.HeartbeatInterval + limitGrace + nodekey.MaxSkew; pastLimit && silent > overdue {
		return fmt.Sprintf("the lease reached its time limit, but its last receipt ended %s before (receipts every %s): "+
			"the node had stopped running it", silent.Truncate(time.Second), every)
	}
	return ""
}

// receiptsWatched reports whether the reaper checks l's receipts: it runs,
// with no stop or notice pending, on a node that is heartbeating.
func receiptsWatched(l *idlegrid.Lease, heard map[string]bool) bool {
	return l.State == idlegrid.LeaseRunning && l.StartedAt != nil && l.StopRequested == "" && heard[l.NodeID]
}

// lastReceipts reads the last receipt of every lease the reaper watches,
// in one store call for the pass rather than one per lease.
func (s *Server) lastReceipts(ctx context.Context, leases []*idlegrid.Lease, heard map[string]bool) (map[string]*idlegrid.Receipt, error) {
	var ids []string
	for _, l := range leases {
		if receiptsWatched(l, heard) {
			ids = append(ids, l.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return s.store.LastReceipts(ctx, ids)
}

// silenceFor is how long a lease whose receipts come every `every` may go
// without one: three intervals, and never less than floor.
func silenceFor(every, floor time.Duration) time.Duration { return max(3*every, floor) }

// heartbeating says which of the online nodes, by their last heartbeats,
// beat at most an interval and its jitter allowance before now.
func (s *Server) heartbeating(beats map[string]time.Time, now time.Time) map[string]bool {
	out := make(map[string]bool, len(beats))
	for id, at := range beats {
		out[id] = now.Sub(at) <= s.cfg.HeartbeatInterval+s.heartbeatJitter()
	}
	return out
}

// abandonedBeforeStop turns the confirmation of a stop the server asked
// for into the provider's failure when the lease's receipts had stopped
// well before the stop was asked (l.NoticeAt), or before its time limit
// when that came first. An agent cuts a last receipt when its workload
// exits and reports the end only after it, so an honest lease's receipts
// reach the stop; a gap of more than a heartbeat interval and the clock
// skew allowed means the node had silently abandoned the lease and only
// answered the stop. A lease with no receipt is left as it is: it is paid
// for NoReceiptCapSeconds at most.
func (s *Server) abandonedBeforeStop(ctx context.Context, l *idlegrid.Lease, end leaseEnd) (leaseEnd, error) {
	if end.to != idlegrid.LeaseCancelled && end.to != idlegrid.LeasePreempted || l.NoticeAt == nil || l.StartedAt == nil {
		return end, nil
	}
	_, last, err := s.store.ReceiptUsage(ctx, l.ID)
	if err != nil || last == nil {
		return end, err
	}
	// Receipts cannot bill past the time limit, so a lease stopped at its
	// limit is judged against the limit.
	asked := *l.NoticeAt
	if limit := l.StartedAt.Add(time.Duration(l.LimitSeconds) * time.Second); limit.Before(asked) {
		asked = limit
	}
	gap := asked.Sub(last.End)
	if gap <= s.cfg.HeartbeatInterval+nodekey.MaxSkew {
		return end, nil
	}
	end.to, end.fault = idlegrid.LeaseFailed, idlegrid.FaultProvider
	end.reason = fmt.Sprintf("the node confirmed the stop (%s), but its receipts had stopped %s before it was asked: it had abandoned the lease",
		end.reason, gap.Truncate(time.Second))
	return end, nil
}
