package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// Join registers a new node under the provider whose join token it presents.
// The HTTP layer has checked that the request is signed by req.PublicKey.
func (s *Server) Join(ctx context.Context, req idlegrid.JoinRequest) (*idlegrid.JoinResponse, error) {
	if req.Token == "" {
		return nil, idlegrid.Invalid("join.token", "required; ask the provider for a join token (idlegrid token create)")
	}
	if _, err := nodekey.ParsePublic(req.PublicKey); err != nil {
		return nil, idlegrid.Invalid("join.public_key", "%v", err)
	}
	if err := req.Offer.Validate(); err != nil {
		return nil, err
	} else if err := idlegrid.CheckAgentVersion(req.AgentVersion); err != nil {
		return nil, err
	}
	now := s.Now()
	n := &idlegrid.Node{
		ID: idlegrid.NewID("node"), PublicKey: req.PublicKey, Offer: req.Offer,
		State: idlegrid.NodeOffline, AgentVersion: req.AgentVersion, CreatedAt: now,
	}
	err := s.store.JoinNode(ctx, hashSecret(req.Token), n)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "unknown join token; ask the provider for a new one")
	} else if err != nil {
		return nil, err
	}
	s.log.Info("node joined", "node", n.ID, "provider", n.ProviderID, "name", n.Name)
	s.standAtJoin(ctx, n) // a flagged provider's new node ranks by its provider's standing from the start
	return &idlegrid.JoinResponse{NodeID: n.ID, ProviderID: n.ProviderID, HeartbeatSeconds: s.heartbeatSeconds()}, nil
}

func (s *Server) heartbeatSeconds() int {
	return int((s.cfg.HeartbeatInterval + time.Second - 1) / time.Second)
}

// UpdateOffer replaces what the calling node offers and marks it online.
// A GPU it now offers as another model or with other memory than before,
// or a GPU new to its offer, is not verified until a challenge of it as
// offered passes, and is challenged (offerChanged).
func (s *Server) UpdateOffer(ctx context.Context, req idlegrid.OfferRequest) error {
	c, err := node(ctx)
	if err != nil {
		return err
	}
	if err := req.Offer.Validate(); err != nil {
		return err
	} else if err := idlegrid.CheckAgentVersion(req.AgentVersion); err != nil {
		return err
	}
	before, err := s.offerSchedule(ctx, c.NodeID, req)
	if err != nil {
		return err
	}
	s.markNode(c.NodeID)
	s.lookSoon(c.NodeID) // its windows may have changed
	if !sameClaims(before.GPUs, req.Offer.GPUs) {
		s.offerChanged(ctx, c.NodeID, before.GPUs)
	}
	return nil
}

// offerSchedule saves the calling node's offer and returns the node as it
// was before. When the offer changes the schedule in force (the agent's,
// unless its owner set one: idlegrid.EffectiveSchedule), the node's uptime
// is first measured up to now under the schedule it replaces
// (measureBeforeSchedule).
func (s *Server) offerSchedule(ctx context.Context, nodeID string, req idlegrid.OfferRequest) (*idlegrid.Node, error) {
	s.trust.mmu.Lock()
	defer s.trust.mmu.Unlock()
	before, err := s.store.FindNode(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	cur, err := s.store.FindNodeSchedule(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	if err := s.measureBeforeSchedule(ctx, before, idlegrid.EffectiveSchedule(req.Offer.Schedule, cur.Owner, now), now); err != nil {
		return nil, err
	}
	return before, s.store.UpdateOffer(ctx, nodeID, req.Offer, req.AgentVersion, now)
}

// Heartbeat marks the calling node alive and records its leases' progress.
// The answer tells the agent whether its node is draining or quarantined,
// so that its owner reads in the agent's log why no new lease comes.
func (s *Server) Heartbeat(ctx context.Context, req idlegrid.HeartbeatRequest) (*idlegrid.HeartbeatResponse, error) {
	c, err := node(ctx)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	standing, err := s.store.Heartbeat(ctx, c.NodeID, now)
	if err != nil {
		return nil, err
	}
	s.noteHeartbeat(ctx, c.NodeID, now)
	if !s.marks.isKnown(c.NodeID) { // back from lost or offline: the engine should see it
		s.markNode(c.NodeID)
	}
	resp := &idlegrid.HeartbeatResponse{HeartbeatSeconds: s.heartbeatSeconds(), Standing: standing}
	for _, p := range req.Leases {
		err := s.setProgress(ctx, c.NodeID, p)
		switch idlegrid.ErrorCode(err) {
		case idlegrid.ECONFLICT:
			err = s.noteEnded(ctx, c.NodeID, p.LeaseID, resp)
		case idlegrid.ENOTFOUND:
			err = nil
			s.noteUnknown(c.NodeID, p.LeaseID, resp)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := s.noteStarting(ctx, c.NodeID, req, resp, now); err != nil {
		return nil, err
	}
	s.reportQueues(c.NodeID, req)
	return resp, nil
}

// Goodbye records that the calling node's agent is stopping: the node
// goes offline at once, so that no new lease is placed on it, rather than
// be declared lost once it has missed its heartbeats. The leases it runs
// stay live until its agent reports them, as it does next; a node that
// goes silent before reporting each is declared lost after the same
// silence as an online one (reapLeaving), and the leases left end lost.
// Its next heartbeat or offer brings it online again.
func (s *Server) Goodbye(ctx context.Context) error {
	c, err := node(ctx)
	if err != nil {
		return err
	}
	if err := s.store.SetNodeState(ctx, c.NodeID, idlegrid.NodeOffline, s.Now()); err != nil {
		return err
	}
	s.markNode(c.NodeID)
	s.log.Info("node said goodbye", "node", c.NodeID)
	return nil
}

// noteEnded tells the agent of a lease it runs that the server has ended,
// so that it stops the workload: no one pays for it any more, and its
// GPUs may be another's.
func (s *Server) noteEnded(ctx context.Context, nodeID, leaseID string, resp *idlegrid.HeartbeatResponse) error {
	l, err := s.nodeLease(ctx, nodeID, leaseID)
	if err != nil || !l.State.Terminal() {
		return err
	}
	resp.Ended = append(resp.Ended, idlegrid.EndedLease{LeaseID: l.ID, State: l.State, Reason: l.Reason})
	return nil
}

// noteUnknown tells the agent to stop a lease it runs that the server has
// no record of for its node (its database restored from a backup older
// than the lease, say): no one pays for the workload. The rest of the
// heartbeat stands: failing it would keep from the agent, on every
// heartbeat, the leases that did end.
func (s *Server) noteUnknown(nodeID, leaseID string, resp *idlegrid.HeartbeatResponse) {
	s.log.Warn("a heartbeat reports a lease the server has no record of for its node; the agent is told to stop it", "node", nodeID, "lease", leaseID)
	resp.Ended = append(resp.Ended, idlegrid.EndedLease{LeaseID: leaseID, State: idlegrid.LeaseFailed,
		Reason: "the server has no record of this lease for this node"})
}

// reportQueues passes a heartbeat's model queues to the gateway. Bad
// ones are left out with a warning rather than failing the heartbeat, as
// a bad checkpoint is: a node must not be lost over its queue report.
func (s *Server) reportQueues(nodeID string, req idlegrid.HeartbeatRequest) {
	r := s.queues.Load()
	if r == nil || *r == nil || len(req.ModelQueues) == 0 {
		return
	}
	if err := req.Validate(); err != nil {
		s.log.Warn("ignoring a heartbeat's model queues", "node", nodeID, "err", err)
		return
	}
	(*r).NoteQueues(nodeID, req.ModelQueues, 2*s.cfg.HeartbeatInterval)
}

// setProgress records a lease's progress; a bronze lease's checkpoint it
// reports for the first time goes to the engine, for the work a preemption
// would lose (the engine reads the others' when it is rebuilt). A
// checkpoint reported by its age is placed in the server's clock, so the
// node's clock need not agree. A checkpoint the store refuses (a bad age,
// or a time from a node's clock far off) is left out, with a warning,
// rather than failing the node's heartbeat; so is a progress outside 0
// to 1 (a workload's own count, rounded past its end), which is kept
// within them.
func (s *Server) setProgress(ctx context.Context, nodeID string, p idlegrid.LeaseProgress) error {
	if !(p.Progress >= 0 && p.Progress <= 1) {
		s.log.Warn("a lease's progress is outside 0 to 1; kept within them", "node", nodeID, "lease", p.LeaseID, "progress", p.Progress)
		p.Progress = min(max(p.Progress, 0), 1)
		if math.IsNaN(p.Progress) {
			p.Progress = 0
		}
	}
	l, err := s.nodeLease(ctx, nodeID, p.LeaseID)
	if err != nil {
		return err
	}
	now := s.Now()
	p.CheckpointAt, err = p.CheckpointIn(now) // in the server's clock when the node says the age
	p.CheckpointAgeSeconds = nil
	checkpointed := false
	if err == nil {
		checkpointed, err = s.store.SetLeaseProgress(ctx, p, now)
	}
	if e := (*idlegrid.Error)(nil); errors.As(err, &e) && strings.HasPrefix(e.Field, "lease.checkpoint_") {
		s.log.Warn("ignoring a lease's checkpoint", "node", nodeID, "lease", p.LeaseID, "err", err)
		p.CheckpointAt = nil
		checkpointed, err = s.store.SetLeaseProgress(ctx, p, now)
	}
	if err == nil {
		s.jobChanged(l.JobID)
	}
	if checkpointed && l.Tier == idlegrid.TierBronze { // only bronze is preempted, so only its checkpoints matter now
		s.markLease(p.LeaseID)
	}
	return err
}

// nodeLease returns a lease that runs on the calling node.
func (s *Server) nodeLease(ctx context.Context, nodeID, leaseID string) (*idlegrid.Lease, error) {
	l, err := s.store.FindLease(ctx, leaseID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && l.NodeID != nodeID) {
		return nil, notFound("lease", leaseID)
	}
	return l, err
}

// Commands returns what the calling node should do now. With nothing to do,
// it waits up to wait for something to change, or until Drain; after it,
// a poll that would wait is unavailable.
func (s *Server) Commands(ctx context.Context, wait time.Duration) ([]idlegrid.Command, error) {
	c, err := node(ctx)
	if err != nil {
		return nil, err
	}
	if s.isDraining() && wait > 0 {
		return nil, idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the server is shutting down; ask again in a moment, of the next server")
	}
	changed, done := s.waiters.wait(c.NodeID) // before reading, so no change is missed
	defer done()
	cmds, err := s.commandsFor(ctx, c.NodeID)
	if err != nil || len(cmds) > 0 || wait <= 0 {
		return cmds, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-changed:
	case <-timer.C:
		return nil, nil
	case <-ctx.Done():
		return nil, nil
	case <-s.draining:
		return nil, nil
	}
	return s.commandsFor(ctx, c.NodeID)
}

// commandsFor derives a node's commands from its live leases: start what
// is assigned, stop what the server asked to stop.
func (s *Server) commandsFor(ctx context.Context, nodeID string) ([]idlegrid.Command, error) {
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{NodeID: nodeID, States: liveLeaseStates})
	if err != nil {
		return nil, err
	}
	var cmds []idlegrid.Command
	for _, l := range leases {
		switch {
		case l.StopRequested != "":
			cmds = append(cmds, idlegrid.Command{Kind: idlegrid.CommandStop, Lease: l, Reason: l.StopRequested})
		case l.State == idlegrid.LeaseAssigned:
			j, err := s.store.FindJob(ctx, l.JobID)
			if err != nil {
				return nil, err
			}
			auth, err := s.registryAuth(ctx, j)
			if err != nil {
				return nil, err
			}
			spec := j.JobSpec.ForNode()
			cmds = append(cmds, idlegrid.Command{Kind: idlegrid.CommandStart, Lease: l, Job: &spec, RegistryAuth: auth})
		}
	}
	return cmds, nil
}

// ReportLease takes the calling node's account of one of its leases.
func (s *Server) ReportLease(ctx context.Context, leaseID string, r idlegrid.LeaseReport) error {
	c, err := node(ctx)
	if err != nil {
		return err
	}
	l, err := s.nodeLease(ctx, c.NodeID, leaseID)
	if err != nil {
		return err
	}
	if l.State.Terminal() {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s already %s: %s", l.ID, l.State, l.Reason)
	}
	r = s.boundReport(l, r)
	end := leaseEnd{exitCode: r.ExitCode, checkpointRef: r.CheckpointRef, outputDigest: r.OutputDigest}
	switch r.State {
	case idlegrid.LeaseRunning:
		return s.leaseStarted(ctx, l, r.Progress)
	case idlegrid.LeaseSucceeded:
		end.to, end.reason = idlegrid.LeaseSucceeded, orDefault(r.Message, "exited 0")
		if end, err = s.undigested(ctx, l, end); err != nil {
			return err
		}
	case idlegrid.LeaseFailed:
		end.to, end.reason, end.fault = idlegrid.LeaseFailed, failedReason(r), failedFault(r.Fault)
	case idlegrid.LeaseCancelled, idlegrid.LeasePreempted:
		if l, err = s.stoppedAtLimit(ctx, l); err != nil {
			return err
		}
		end = stoppedEnd(l, r, end)
		if end, err = s.abandonedBeforeStop(ctx, l, end); err != nil {
			return err
		}
	default:
		return idlegrid.Invalid("report.state", "must be running, succeeded, failed, cancelled or preempted, got %q", r.State)
	}
	return s.endLease(ctx, l, end)
}

// Bounds on what a node's report carries into the lease's end, its audit
// entry, a verification and a dispute, so that each always fits the audit
// log's entries (64 KiB): a report refused for its size would leave its
// lease running for good.
const (
	// maxReportMessageBytes bounds a report's message, the lease's
	// reason; a longer one is cut (idlegrid.ClipText).
	maxReportMessageBytes = 4 << 10
	// maxOutputDigestBytes is far more than any digest's length
	// ("sha256:" and 64 hex digits).
	maxOutputDigestBytes = 256
)

// boundReport is r within the bounds above: its message cut, and a
// checkpoint reference longer than a job may name, or a digest longer
// than any, left out with a warning, as a bad checkpoint time is. The
// lease still ends.
func (s *Server) boundReport(l *idlegrid.Lease, r idlegrid.LeaseReport) idlegrid.LeaseReport {
	r.Message = idlegrid.ClipText(r.Message, maxReportMessageBytes)
	if len(r.CheckpointRef) > idlegrid.MaxCheckpointRefBytes {
		s.log.Warn("ignoring a lease's checkpoint reference", "node", l.NodeID, "lease", l.ID, "bytes", len(r.CheckpointRef))
		r.CheckpointRef = ""
	}
	if len(r.OutputDigest) > maxOutputDigestBytes {
		s.log.Warn("ignoring a lease's output digest", "node", l.NodeID, "lease", l.ID, "bytes", len(r.OutputDigest))
		r.OutputDigest = ""
	}
	return r
}

// undigested fails, by the node's fault, a verifiable job's lease that
// the node says succeeded without the digest of its output: a success
// that cannot be checked would let a node skip its spot checks. (An agent
// that restarted during the lease reads the digest back from the
// container's log, and gives none when the log may have lost its
// beginning.) The job is requeued and its renter pays nothing for the
// lease.
func (s *Server) undigested(ctx context.Context, l *idlegrid.Lease, end leaseEnd) (leaseEnd, error) {
	if end.outputDigest != "" {
		return end, nil
	}
	j, err := s.store.FindJob(ctx, l.JobID)
	if err != nil {
		return end, err
	}
	if j.Verifiable {
		end.to, end.fault = idlegrid.LeaseFailed, idlegrid.FaultProvider
		end.reason = "the node reported success without the digest of the output that a verifiable job needs (an agent restarted during a lease gives none when the container's log no longer holds the whole output)"
	}
	return end, nil
}

// stoppedEnd decides how a lease the node reports cancelled or preempted
// ends. A stop the server asked for is a cancel, or a preemption after a
// bronze notice; anything else is the node breaking its word, whatever it
// calls it: the server cannot tell that a node gave the notice it claims.
// (A node whose owner takes a GPU back gives its leases their notice and
// reports each failed by the node's fault: a failure, not a broken word.)
// stoppedAtLimit returns running lease l with the stop its time limit
// calls for recorded, when its node stopped it past that limit before the
// server asked (an agent that could not reach the server stops a workload
// past its limit itself): the lease ends as the server's own limit stop
// would end it (idlegrid.LimitStop), not as the node's failure. Any other
// lease is returned as it is.
func (s *Server) stoppedAtLimit(ctx context.Context, l *idlegrid.Lease) (*idlegrid.Lease, error) {
	if l.State != idlegrid.LeaseRunning || l.StopRequested != "" || l.StartedAt == nil ||
		s.Now().Sub(*l.StartedAt) < time.Duration(l.LimitSeconds)*time.Second {
		return l, nil
	}
	if err := s.stopLease(ctx, l, idlegrid.LimitStop(l)); err != nil {
		return nil, err
	}
	return s.nodeLease(ctx, l.NodeID, l.ID)
}

func stoppedEnd(l *idlegrid.Lease, r idlegrid.LeaseReport, end leaseEnd) leaseEnd {
	switch {
	case strings.HasPrefix(l.StopRequested, noticePrefix):
		end.to, end.reason = idlegrid.LeasePreempted, strings.TrimPrefix(l.StopRequested, noticePrefix)
	case l.StopRequested != "":
		end.to, end.reason = idlegrid.LeaseCancelled, l.StopRequested
	default:
		end.to, end.fault = idlegrid.LeaseFailed, idlegrid.FaultProvider
		end.reason = "stopped by the node: " + orDefault(r.Message, "no reason given")
		end.brokeNotice = l.Tier == idlegrid.TierBronze // its tier guarantees notice before any stop
	}
	return end
}

func (s *Server) leaseStarted(ctx context.Context, l *idlegrid.Lease, progress float64) error {
	if l.State == idlegrid.LeaseRunning {
		return s.setProgress(ctx, l.NodeID, idlegrid.LeaseProgress{LeaseID: l.ID, Progress: progress})
	}
	err := s.store.TransitionLease(ctx, &idlegrid.LeaseTransition{
		LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned}, To: idlegrid.LeaseRunning,
		Reason: "started by the agent", At: s.Now(),
	}, nil)
	if err == nil {
		s.markLease(l.ID) // its start time matters to preemption
		s.jobChanged(l.JobID)
	}
	return err
}

func failedReason(r idlegrid.LeaseReport) string {
	msg := r.Message
	if msg == "" && r.ExitCode != nil {
		msg = fmt.Sprintf("exited %d", *r.ExitCode)
	}
	return orDefault(msg, "failed")
}

func failedFault(f idlegrid.Fault) idlegrid.Fault {
	if f == idlegrid.FaultProvider {
		return f
	}
	return idlegrid.FaultWorkload
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// maxLogLinesPerBatch limits a request's lines of output.
const maxLogLinesPerBatch = 1000

// logsAfterEnd is how long after a lease ends its node may still send the
// output it buffered (a node back from an outage, whose lease the server
// ended meanwhile). Later, a node could write what the renter would take
// for its job's output, to a lease long over.
const logsAfterEnd = 10 * time.Minute

// AppendLogs stores lines of a lease's output sent by its node.
func (s *Server) AppendLogs(ctx context.Context, leaseID string, b idlegrid.LogBatch) error {
	c, err := node(ctx)
	if err != nil {
		return err
	}
	l, err := s.nodeLease(ctx, c.NodeID, leaseID)
	if err != nil {
		return err
	}
	if l.EndedAt != nil && s.Now().Sub(*l.EndedAt) > logsAfterEnd {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s ended at %s; its output closed %v later", l.ID, l.EndedAt.UTC().Format(time.RFC3339), logsAfterEnd)
	}
	if len(b.Lines) > maxLogLinesPerBatch {
		return idlegrid.Invalid("logs.lines", "at most %d lines per batch", maxLogLinesPerBatch)
	}
	for i := range b.Lines {
		b.Lines[i].Text = idlegrid.ClipLogLine(b.Lines[i].Text) // keep the line, drop the excess
		if b.Lines[i].Stream != "stderr" {
			b.Lines[i].Stream = "stdout"
		}
	}
	return s.store.AppendLogs(ctx, leaseID, b.Lines)
}
