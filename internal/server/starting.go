package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// A node may take long to start a lease: it pulls the job's image first,
// and a large image over a home link takes many minutes. Each heartbeat
// names the leases its node is still starting (HeartbeatRequest.Starting).
// A lease it names is not lost for being slow to start until the node has
// not named it for StartTimeout, or until it has been starting for
// MaxStart since its placement (startOverdue).

// startsHeard is when each node last named each lease it is starting,
// and how far it said the pull of the lease's image had come, in this
// process's memory: a restart gives every lease StartTimeout afresh
// (silentSince), and the node names its leases again at its next
// heartbeat.
type startsHeard struct {
	mu    sync.Mutex
	nodes map[string]map[string]startHeard // node → lease
}

// startHeard is when a node last named a lease starting, and the pull of
// its image as of then; the pull's At is when it last moved, so that a
// job's watch sees a change only when the pull moves.
type startHeard struct {
	at   time.Time
	pull idlegrid.LeasePull
}

// hear records that nodeID named lease st as starting at now; it reports
// whether the pull moved since the node last named it.
func (h *startsHeard) hear(nodeID string, st idlegrid.LeaseStarting, now time.Time) (moved bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nodes == nil {
		h.nodes = map[string]map[string]startHeard{}
	}
	if h.nodes[nodeID] == nil {
		h.nodes[nodeID] = map[string]startHeard{}
	}
	prev := h.nodes[nodeID][st.LeaseID]
	next := startHeard{at: now, pull: prev.pull}
	if moved = prev.pull.PulledBytes != st.PulledBytes || prev.pull.ImageBytes != st.ImageBytes; moved {
		next.pull = idlegrid.LeasePull{PulledBytes: st.PulledBytes, ImageBytes: st.ImageBytes, At: now}
	}
	h.nodes[nodeID][st.LeaseID] = next
	return moved
}

// last is when nodeID last named leaseID as starting; zero if it has not
// since it was last forgotten.
func (h *startsHeard) last(nodeID, leaseID string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodes[nodeID][leaseID].at
}

// pull is how far the pull of leaseID's image had come when nodeID last
// named it starting; nil when it has not, or named no pull.
func (h *startsHeard) pull(nodeID, leaseID string) *idlegrid.LeasePull {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.nodes[nodeID][leaseID].pull
	if p.ImageBytes == 0 {
		return nil
	}
	return &p
}

// forget drops what was heard before t: once StartTimeout old, it no
// longer keeps a lease from being lost.
func (h *startsHeard) forget(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for nodeID, leases := range h.nodes {
		for leaseID, heard := range leases {
			if heard.at.Before(t) {
				delete(leases, leaseID)
			}
		}
		if len(leases) == 0 {
			delete(h.nodes, nodeID)
		}
	}
}

// noteStarting records the leases a heartbeat names as starting, once it
// has found each is the node's and assigned. One that has ended goes in
// the answer's Ended, and one the server has no record of for the node
// too, so that the agent gives up pulling its image. A bad list is left
// out with a warning, as a bad queue report is: a node must not be lost
// over it.
func (s *Server) noteStarting(ctx context.Context, nodeID string, req idlegrid.HeartbeatRequest, resp *idlegrid.HeartbeatResponse, now time.Time) error {
	if err := req.ValidateStarting(); err != nil {
		s.log.Warn("ignoring a heartbeat's leases starting", "node", nodeID, "err", err)
		return nil
	}
	for _, st := range req.Starting {
		l, err := s.nodeLease(ctx, nodeID, st.LeaseID)
		switch {
		case idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND:
			s.noteUnknown(nodeID, st.LeaseID, resp)
		case err != nil:
			return err
		case l.State.Terminal():
			resp.Ended = append(resp.Ended, idlegrid.EndedLease{LeaseID: l.ID, State: l.State, Reason: l.Reason})
		case l.State == idlegrid.LeaseAssigned:
			if s.starts.hear(nodeID, st, now) {
				s.jobChanged(l.JobID) // its watches show the pull
			}
		}
	}
	return nil
}

// withPulls adds to the assigned leases of ls how far their nodes said the
// pulls of their images had come (Lease.Pull).
func (s *Server) withPulls(ls ...*idlegrid.Lease) {
	for _, l := range ls {
		if l.State == idlegrid.LeaseAssigned {
			l.Pull = s.starts.pull(l.NodeID, l.ID)
		}
	}
}

// startOverdue says why an assigned lease counts as never started, or ""
// when it does not (or is not assigned): its node has not named it as
// starting for StartTimeout, since its placement or since it last did;
// or it has been starting for MaxStart.
func (s *Server) startOverdue(l *idlegrid.Lease, now time.Time) string {
	if l.State != idlegrid.LeaseAssigned {
		return ""
	}
	heard := s.starts.last(l.NodeID, l.ID)
	silent := s.silentSince(later(l.CreatedAt, heard), now) > s.cfg.StartTimeout
	switch {
	case silent && heard.IsZero():
		return fmt.Sprintf("the node did not start the lease within %s", s.cfg.StartTimeout)
	case silent:
		return fmt.Sprintf("the node did not start the lease within %s of last saying it was starting it", s.cfg.StartTimeout)
	case s.silentSince(l.CreatedAt, now) > s.cfg.MaxStart:
		return fmt.Sprintf("the node did not start the lease within %s of its placement (it was still starting it, most likely pulling the job's image)", s.cfg.MaxStart)
	}
	return ""
}

// startBy is the start-by a lease of j placed at now keeps: the sooner of
// its pick's (market.Pick.StartBy: in time for what follows on the node)
// and j's latest start, when j has a deadline; never sooner than
// StartTimeout after the placement, the start any node may take, so that
// a job that fits exactly still runs (late by that delay at most); none
// when it is MaxStart away or more, when the reaper gives up on the lease
// anyway (startOverdue).
func (s *Server) startBy(j *idlegrid.Job, pick, now time.Time) *time.Time {
	if latest, ok := j.LatestStart(); ok && (pick.IsZero() || latest.Before(pick)) {
		pick = latest
	}
	if pick.IsZero() || !pick.Before(now.Add(s.cfg.MaxStart)) {
		return nil
	}
	t := later(pick, now.Add(s.cfg.StartTimeout))
	return &t
}

// startTooLate says why an assigned lease with a StartBy must be taken
// back, or "" when it need not: its node has not started it by then, and
// started now, it would not finish its job by its deadline, or run past
// what follows on the node, as the engine says (market.Engine.EndBy): its
// window's close, or another job's reservation of it. A reservation lives
// only in the engine, gone when the engine is rebuilt until its job plans
// again, so a lease may be taken back at a later pass. The lease was
// placed on the promise of ending by then: a slow start (a long image
// pull) must not break it.
func (s *Server) startTooLate(ctx context.Context, l *idlegrid.Lease, now time.Time) (string, error) {
	if l.State != idlegrid.LeaseAssigned || l.StartBy == nil || !now.After(*l.StartBy) {
		return "", nil
	}
	would, err := s.startedNow(ctx, l, now)
	if would == "" || err != nil {
		return "", err
	}
	return fmt.Sprintf("the node had not started the lease by %s; started now, it would %s: it goes back to the queue",
		l.StartBy.UTC().Format(time.RFC3339), would), nil
}

// startedNow says what a lease started at now would break, or "": finish
// its job after its deadline, or run past what follows on its node.
func (s *Server) startedNow(ctx context.Context, l *idlegrid.Lease, now time.Time) (string, error) {
	j, err := s.store.FindJob(ctx, l.JobID)
	if err != nil {
		return "", err
	}
	if latest, ok := j.LatestStart(); ok && now.After(latest) {
		return "not finish its job by its deadline, " + j.Deadline.UTC().Format(time.RFC3339), nil
	}
	var endBy time.Time
	var what string
	var ok bool
	if err := s.ask(ctx, func(e *market.Engine) { endBy, what, ok = e.EndBy(l.ID) }); err != nil {
		return "", err
	}
	if !ok || !now.Add(time.Duration(l.LimitSeconds)*time.Second).After(endBy) {
		return "", nil
	}
	return "run past " + what + " at " + endBy.UTC().Format(time.RFC3339), nil
}
