package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/reputation"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// Reputation (docs/trust.md): the coordinator turns what happens in the
// market into facts about nodes, keeps each node's and provider's score and
// level under the trust policy, and records every promotion and demotion.
// A node's saved score is its reliability, what the engine ranks it by;
// its level decides whether it may run gold jobs (market.Config.GoldMinLevel).
//
// Facts are born in three places:
//   - a lease's end (endLease calls noteLeaseEnded): completed, failed by
//     the provider, notices honoured or broken (reputation.FactsFromLease),
//     and its receipts checked against the node's heartbeats;
//   - the reaper's pass (measureUptime): each promised window that ended,
//     measured against the heartbeats heard (noteHeartbeat keeps them as
//     they arrive);
//   - hardware challenges (attest.go, afterChallenge).

// trust is the coordinator's reputation bookkeeping.
type trust struct {
	policy *trustpolicy.Policy
	// mu serialises computing and saving standings, so that two facts about
	// one node do not race; the store's version check guards other
	// coordinators sharing the database.
	mu sync.Mutex

	umu    sync.Mutex
	uptime map[string]*uptimeTrack // by node ID
	// mmu serialises measuring a node's uptime (lookAtUptime) with
	// changing its schedule (measureBeforeSchedule), so that no look
	// measures past hours under a schedule that was not in force in them.
	// It is taken before mu, never after.
	mmu sync.Mutex
}

const (
	// keepOnline is how long heartbeat spans are kept, to check the
	// receipts of leases that ended.
	keepOnline = 7 * 24 * time.Hour
	// saveAttempts bounds the retries of a save that met a newer version.
	saveAttempts = 3
	// viewFacts and viewChanges bound what a reputation view lists.
	viewFacts, viewChanges = 50, 20
)

// TrustPolicy returns the trust policy in force.
func (s *Server) TrustPolicy() *trustpolicy.Policy { return s.trust.policy }

// heartbeatJitter is how late a heartbeat may arrive after the previous
// one's interval ran out and still join its span: half an interval, for
// network and scheduling delays. A node that skips a heartbeat arrives a
// whole interval late and leaves a gap of one interval.
func (s *Server) heartbeatJitter() time.Duration { return s.cfg.HeartbeatInterval / 2 }

// noteHeartbeat records a heartbeat where it arrives, as part of the
// node's heartbeat spans (idlegrid.HeartbeatStore). A failure is logged:
// the heartbeat itself was recorded.
func (s *Server) noteHeartbeat(ctx context.Context, nodeID string, at time.Time) {
	if err := s.store.NoteHeartbeat(ctx, nodeID, at, s.cfg.HeartbeatInterval, s.heartbeatJitter(), at.Add(-keepOnline)); err != nil {
		s.log.Error("note heartbeat", "node", nodeID, "err", err)
	}
}

// heardSpans returns the spans in which the node's heartbeats were heard
// within [from, to).
func (s *Server) heardSpans(ctx context.Context, nodeID string, from, to time.Time) ([]reputation.Span, error) {
	hs, err := s.store.ListHeartbeatSpans(ctx, nodeID, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]reputation.Span, len(hs))
	for i, h := range hs {
		out[i] = reputation.Span{Start: h.Start, End: h.End}
	}
	return out, nil
}

// noteLeaseEnded records what the end of l, by transition t, tells about
// its node. gpuSeconds is what the lease charged for. The save removes
// follow-up completes (its last step: followup.go) in its transaction, so
// that the GPU-seconds served, which no fact's key guards, count once;
// completed says it did, or had done so before. A failure is logged and
// returned: the lease has ended either way, and the reaper tries again.
func (s *Server) noteLeaseEnded(ctx context.Context, l *idlegrid.Lease, t *idlegrid.LeaseTransition, gpuSeconds int64, completes string) (completed bool, err error) {
	ended := *l
	ended.State, ended.Fault, ended.EndedAt = t.To, t.Fault, &t.At
	var facts []idlegrid.ReputationFact
	for _, f := range reputation.FactsFromLease(&ended) {
		facts = append(facts, storedFact(l.NodeID, "lease:"+l.ID+":"+string(f.Kind), l.ID, f, 1))
	}
	facts = append(facts, s.receiptFacts(ctx, &ended)...)
	var served int64
	if t.Fault != idlegrid.FaultProvider && t.To != idlegrid.LeaseLost {
		served = gpuSeconds
	}
	if len(facts) == 0 && served == 0 {
		return false, nil
	}
	err = s.recordFacts(ctx, l.NodeID, facts, standingDelta{served: served, ended: &ended, completes: completes})
	switch {
	case followUpGone(err):
		return true, nil // done before: by the live path, or the reaper
	case err != nil:
		s.log.Error("record reputation facts", "lease", l.ID, "node", l.NodeID, "err", err)
		return false, err
	}
	return completes != "", nil
}

// followUpGone reports whether err says a save's follow-up was done
// already (ReputationUpdate.Completes).
func followUpGone(err error) bool {
	var e *idlegrid.Error
	return errors.As(err, &e) && e.Code == idlegrid.ENOTFOUND && e.Field == "reputation.completes"
}

func storedFact(nodeID, key, source string, f reputation.Fact, count int64) idlegrid.ReputationFact {
	return idlegrid.ReputationFact{Key: key, NodeID: nodeID, Kind: string(f.Kind), At: f.At, Count: count,
		PromisedSeconds: f.PromisedSeconds, OnlineSeconds: f.OnlineSeconds, Source: source}
}

// receiptFacts checks the receipts of an ended lease against the
// heartbeats heard inside each receipt's interval, when this coordinator
// watched the node for all of them: one stored fact per outcome, counting
// its receipts. Receipts are timed by the node's clock and the heartbeats
// by the server's, and the server accepts a node's requests within
// nodekey.MaxSkew of its clock, so the lease's receipts are judged at the
// one offset within that skew at which they fit best
// (reputation.ReceiptOffset), give or take one heartbeat interval. A lease
// whose receipts bill unheard time again and again (billsUnheardTime)
// also convicts its provider of a forged receipt.
func (s *Server) receiptFacts(ctx context.Context, l *idlegrid.Lease) []idlegrid.ReputationFact {
	rs, err := s.store.ListReceipts(ctx, l.ID)
	if err != nil || len(rs) == 0 {
		return nil
	}
	tolerance := s.cfg.HeartbeatInterval
	since := s.watchedSince(l.NodeID)
	if since.IsZero() || since.After(rs[0].Start.Add(-tolerance)) {
		return nil // no telemetry to judge them by
	}
	heard, err := s.heardSpans(ctx, l.NodeID, rs[0].Start.Add(-nodekey.MaxSkew), rs[len(rs)-1].End.Add(nodekey.MaxSkew))
	if err != nil {
		s.log.Error("heartbeat spans", "node", l.NodeID, "lease", l.ID, "err", err)
		return nil
	}
	lo, hi := receiptOffsets(l, &rs[0])
	offset := reputation.ReceiptOffset(rs, len(l.GPUUUIDs), heard, tolerance, lo, hi)
	counts := map[reputation.FactKind]int64{}
	var unheard []int
	for i := range rs {
		f := reputation.ReceiptFact(&rs[i], len(l.GPUUUIDs), heard, tolerance, offset, *l.EndedAt)
		counts[f.Kind]++
		if f.Kind == reputation.FactReceiptInconsistent {
			unheard = append(unheard, i)
		}
	}
	if billsUnheardTime(len(unheard), len(rs)) && !oneOutage(rs, unheard, heard, offset, tolerance, s.lostSilence()) {
		s.unheardReceipts(ctx, l, rs, unheard, heard, tolerance, offset)
	}
	var out []idlegrid.ReputationFact
	for _, k := range []reputation.FactKind{reputation.FactReceiptConsistent, reputation.FactReceiptInconsistent} {
		if n := counts[k]; n > 0 {
			out = append(out, storedFact(l.NodeID, "receipts:"+l.ID+":"+string(k), l.ID, reputation.Fact{Kind: k, At: *l.EndedAt}, n))
		}
	}
	return out
}

// receiptOffsets bounds how far the receipts of l, whose first is first,
// may be moved to place them in the server's clock: by the skew the server
// accepts in a node's requests, and so that the first starts when the
// workload can have started, after the lease was placed and before the
// node reported it running (an agent meters a workload from its start,
// then reports it). A node whose clock is off by d has its receipts moved
// by -d.
func receiptOffsets(l *idlegrid.Lease, first *idlegrid.Receipt) (lo, hi time.Duration) {
	lo, hi = -nodekey.MaxSkew, nodekey.MaxSkew
	lo = max(lo, l.CreatedAt.Sub(first.Start))
	if l.StartedAt != nil {
		hi = min(hi, l.StartedAt.Sub(first.Start))
	}
	return lo, hi
}

// billsUnheardTime reports whether a lease's receipts clearly bill time in
// which its node was not heard: at least two of them, and at least half,
// claim more than the heartbeats heard inside them allow. One such receipt
// may be a network outage the node could not help; a pattern is a node
// that bills while it is away.
func billsUnheardTime(inconsistent, receipts int) bool {
	return inconsistent >= 2 && 2*inconsistent >= receipts
}

// oneOutage reports whether the time the receipts at bad bill unheard
// is one silence shorter than the node's lost threshold (silence): an
// outage that straddles receipts makes each inconsistent (facts against
// the node), but a node that was away less than the market allows a node
// to be away, once, is no forger. Unheard slivers shorter than tolerance,
// a heartbeat interval, are jitter and do not count.
func oneOutage(rs []idlegrid.Receipt, bad []int, heard []reputation.Span, offset, tolerance, silence time.Duration) bool {
	var gaps []reputation.Span
	for _, i := range bad {
		for _, g := range unheardIn(rs[i].Start.Add(offset), rs[i].End.Add(offset), heard) {
			if n := len(gaps); n > 0 && !g.Start.After(gaps[n-1].End) {
				gaps[n-1].End = g.End // the same silence, on into the next receipt
			} else {
				gaps = append(gaps, g)
			}
		}
	}
	gaps = slices.DeleteFunc(gaps, func(g reputation.Span) bool { return g.End.Sub(g.Start) < tolerance })
	return len(gaps) == 1 && gaps[0].End.Sub(gaps[0].Start) < silence
}

// unheardIn is the parts of [from, to) no span of heard, in order, covers.
func unheardIn(from, to time.Time, heard []reputation.Span) []reputation.Span {
	var out []reputation.Span
	at := from
	for _, h := range heard {
		if !h.End.After(at) {
			continue
		} else if !h.Start.Before(to) {
			break
		}
		if h.Start.After(at) {
			out = append(out, reputation.Span{Start: at, End: h.Start})
		}
		at = h.End
	}
	if at.Before(to) {
		out = append(out, reputation.Span{Start: at, End: to})
	}
	return out
}

// unheardReceipts convicts the lease's provider of forged receipts that
// billed unheard time; the harm is what the unheard GPU-seconds charged.
func (s *Server) unheardReceipts(ctx context.Context, l *idlegrid.Lease, rs []idlegrid.Receipt, bad []int, heard []reputation.Span, tolerance, offset time.Duration) {
	gpus := int64(len(l.GPUUUIDs))
	var excess int64
	type evidence struct {
		Seq          int64 `json:"seq"`
		GPUSeconds   int64 `json:"gpu_seconds"`
		HeardSeconds int64 `json:"heard_seconds"`
	}
	var detail []evidence
	for _, i := range bad {
		r := &rs[i]
		on := int64(reputation.Heard(r.Start.Add(offset), r.End.Add(offset), heard) / time.Second)
		excess += max(r.GPUSeconds-gpus*on, 0)
		detail = append(detail, evidence{Seq: r.Seq, GPUSeconds: r.GPUSeconds, HeardSeconds: on})
	}
	s.convict(context.WithoutCancel(ctx), offence{
		kind: trustpolicy.OffenceForgedReceipt, providerID: l.ProviderID, nodeID: l.NodeID, leaseID: l.ID,
		renterID: l.RenterID, harm: idlegrid.CostOf(l.PriceMicrosPerGPUHour, excess),
		evidence: fmt.Sprintf("node %s billed time in which it was not heard: %d of the %d receipts of lease %s claim more than "+
			"the heartbeats heard inside them allow (give or take %s, with its clock taken as %s off the server's), %d GPU-seconds in all",
			l.NodeID, len(bad), len(rs), l.ID, tolerance, -offset, excess),
		detail: map[string]any{"receipts": detail, "heard": heard, "clock_offset_seconds": int64(-offset / time.Second)},
	})
}

// standingDelta is what changes a standing besides its facts.
type standingDelta struct {
	served    int64           // GPU-seconds served
	through   time.Time       // uptime measured up to here
	ended     *idlegrid.Lease // the lease whose end the node's record already counts, if any
	completes string          // the follow-up the save completes (ReputationUpdate.Completes)
}

// recordFacts adds facts to a node's standing, recomputes its score and
// level and then its provider's, and saves both with any level change in
// one transaction, so that the provider's pooled evidence never lacks, nor
// counts twice, what its node's holds.
func (s *Server) recordFacts(ctx context.Context, nodeID string, facts []idlegrid.ReputationFact, d standingDelta) error {
	s.trust.mu.Lock()
	defer s.trust.mu.Unlock()
	return retryStale(func() error {
		ns, err := s.nodeUpdate(ctx, nodeID, facts, d)
		if err != nil {
			return err
		}
		pu, err := s.providerUpdate(ctx, ns)
		if err != nil {
			return err
		}
		if err := s.standOnProvider(ctx, ns, pu.Reputation); err != nil {
			return err
		}
		if err := s.store.SaveReputation(ctx, ns.update, pu); err != nil {
			return err
		}
		s.saved(ns, pu)
		return nil
	})
}

// providerDelta is what a node's save adds to its provider's evidence.
type providerDelta struct {
	facts   []reputation.Fact
	carried *reputation.Evidence // the node's first standing's carried-over record
	served  int64
}

// retryStale runs save again while it meets a newer version, a few times.
func retryStale(save func() error) error {
	var err error
	for range saveAttempts {
		if err = save(); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			return err
		}
	}
	return err
}

// nodeSave is a node's standing about to be saved.
type nodeSave struct {
	node   *idlegrid.Node
	update *idlegrid.ReputationUpdate
	added  providerDelta // what it adds to the provider's evidence
	score  float64       // the standing's score before
	level  int           // and its level
	chk    levelChecks   // its level's checks
}

// nodeUpdate reads node nodeID's standing (or carries its lease record
// over into a first one) and returns it with facts and d added, rescored.
func (s *Server) nodeUpdate(ctx context.Context, nodeID string, facts []idlegrid.ReputationFact, d standingDelta) (*nodeSave, error) {
	now := s.Now()
	n, err := s.store.FindNode(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	ns := &nodeSave{node: n}
	rep, err := s.store.FindReputation(ctx, idlegrid.SubjectNode, nodeID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		rep = carriedOver(n, d.ended, now)
		carried := reputation.EvidenceOf(rep)
		ns.added.carried = &carried
	} else if err != nil {
		return nil, err
	}
	for _, f := range facts {
		ns.added.facts = append(ns.added.facts, expand(f)...)
	}
	ev, err := s.trust.policy.Reputation.Add(reputation.EvidenceOf(rep), ns.added.facts...)
	if err != nil {
		return nil, err
	}
	ns.added.served = d.served
	rep.GPUSecondsServed += d.served
	if d.through.After(rep.UptimeThrough) {
		rep.UptimeThrough = d.through
	}
	chk, err := s.nodeChecks(ctx, n)
	if err != nil {
		return nil, err
	}
	ns.score, ns.level, ns.chk = rep.Score, rep.Level, chk
	rep.HardwareNote = chk.hardwareDoubt // its provider's standing reads it (providerChecks)
	change, _ := s.restand(rep, ev, now, chk)
	ns.update = &idlegrid.ReputationUpdate{Reputation: rep, Facts: facts, Change: change, Completes: d.completes}
	return ns, nil
}

// saved logs the level changes of a node's and its provider's saved
// standings and has the engine rank the node by its new one.
func (s *Server) saved(ns *nodeSave, pu *idlegrid.ReputationUpdate) {
	rep := ns.update.Reputation
	if c := ns.update.Change; c != nil {
		s.log.Info("node level changed", "node", rep.SubjectID, "from", c.From, "to", c.To, "reasons", c.Reasons)
	}
	if c := pu.Change; c != nil {
		s.log.Info("provider level changed", "provider", pu.Reputation.SubjectID, "from", c.From, "to", c.To, "reasons", c.Reasons)
	}
	if rep.Score != ns.score || rep.Level != ns.level || rep.Version == 1 {
		s.markNode(rep.SubjectID) // the engine ranks by the saved score and level
	}
}

// carriedOver is the first standing of a node: its lease record carried
// over (reputation.FromRecord), less the lease whose end is about to be
// counted as a fact, which the record already holds.
func carriedOver(n *idlegrid.Node, ended *idlegrid.Lease, now time.Time) *idlegrid.Reputation {
	completed, failed := n.LeasesCompleted, n.LeasesFailed
	if ended != nil {
		switch {
		case ended.State == idlegrid.LeaseSucceeded, ended.State == idlegrid.LeaseFailed && ended.Fault == idlegrid.FaultWorkload:
			completed--
		case ended.State == idlegrid.LeaseLost, ended.State == idlegrid.LeaseFailed && ended.Fault == idlegrid.FaultProvider:
			failed--
		}
	}
	ev := reputation.FromRecord(max(completed, 0), max(failed, 0), now)
	return &idlegrid.Reputation{Subject: idlegrid.SubjectNode, SubjectID: n.ID, ProviderID: n.ProviderID,
		Counts: countsOf(ev), CountsAt: now, Score: n.Reliability, Level: n.Level}
}

// providerUpdate is the node's provider's standing with what the node's
// save adds. Pooling is linear (decayed counts add up), so the provider's
// evidence stays its nodes' evidence pooled (Params.Pool) without reading
// them all; its first standing pools them, the node's as it will be saved.
func (s *Server) providerUpdate(ctx context.Context, ns *nodeSave) (*idlegrid.ReputationUpdate, error) {
	now := s.Now()
	p := s.trust.policy.Reputation
	providerID, pending := ns.node.ProviderID, ns.update.Reputation
	rep, err := s.store.FindReputation(ctx, idlegrid.SubjectProvider, providerID)
	var ev reputation.Evidence
	switch {
	case idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND:
		if rep, ev, err = s.providerStanding(ctx, providerID, pending); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		ev = reputation.EvidenceOf(rep)
		if ns.added.carried != nil {
			ev = p.Pool(ev, *ns.added.carried)
		}
		if ev, err = p.Add(ev, ns.added.facts...); err != nil {
			return nil, err
		}
		rep.GPUSecondsServed += ns.added.served
	}
	chk, err := s.providerChecks(ctx, providerID, pending)
	if err != nil {
		return nil, err
	}
	change, _ := s.restand(rep, ev, now, chk)
	return &idlegrid.ReputationUpdate{Reputation: rep, Change: change}, nil
}

// providerStanding is a provider's saved standing (or a newcomer's) with
// its nodes' evidence pooled, as of now, and the GPU-seconds they served.
// A pending node standing, when not nil, stands in for that node's saved
// one.
func (s *Server) providerStanding(ctx context.Context, providerID string, pending *idlegrid.Reputation) (*idlegrid.Reputation, reputation.Evidence, error) {
	nodes, err := s.store.ListReputations(ctx, idlegrid.ReputationFilter{Subject: idlegrid.SubjectNode, ProviderID: providerID})
	if err != nil {
		return nil, reputation.Evidence{}, err
	}
	if pending != nil {
		nodes = withPending(nodes, pending)
	}
	rep, err := s.store.FindReputation(ctx, idlegrid.SubjectProvider, providerID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		rep, err = &idlegrid.Reputation{Subject: idlegrid.SubjectProvider, SubjectID: providerID, ProviderID: providerID}, nil
	}
	if err != nil {
		return nil, reputation.Evidence{}, err
	}
	p := s.trust.policy.Reputation
	evs := make([]reputation.Evidence, len(nodes))
	rep.GPUSecondsServed = 0
	for i, n := range nodes {
		evs[i] = reputation.EvidenceOf(n)
		rep.GPUSecondsServed += n.GPUSecondsServed
	}
	return rep, p.DecayedTo(p.Pool(evs...), s.Now()), nil
}

// withPending is the node standings rs with pending in place of its
// node's saved one, or added.
func withPending(rs []*idlegrid.Reputation, pending *idlegrid.Reputation) []*idlegrid.Reputation {
	out := slices.DeleteFunc(slices.Clone(rs), func(r *idlegrid.Reputation) bool { return r.SubjectID == pending.SubjectID })
	return append(out, pending)
}

// A new node stands on its provider (docs/trust.md, "A new node stands on
// its provider"): while a node's own evidence is thin, a flagged provider
// bounds its score by its own, so that a provider the market caught cannot
// shed its record by joining a new node. Only the node's score is bounded,
// never its evidence, which its provider's pools: nothing counts twice.

// scoreOf is the score a standing ranks by at now: its own, bounded for a
// thin node by its flagged provider's (chk.provider, NodeScore).
func (s *Server) scoreOf(ev reputation.Evidence, now time.Time, chk levelChecks) float64 {
	p := s.trust.policy.Reputation
	if chk.provider != nil {
		return p.NodeScore(ev, now, *chk.provider)
	}
	return p.Score(ev, now)
}

// standOnProvider bounds the node standing about to be saved by its
// flagged provider's, as saved with it (provider), and decides its level
// again on the bounded score.
func (s *Server) standOnProvider(ctx context.Context, ns *nodeSave, provider *idlegrid.Reputation) error {
	now := s.Now()
	rep := ns.update.Reputation
	f, err := s.bounding(ctx, rep, provider, now)
	if err != nil || f == nil {
		return err
	}
	chk := ns.chk
	chk.provider = f
	rep.Level = ns.level // the level held, which restand compares with
	ns.update.Change, _ = s.restand(rep, reputation.EvidenceOf(rep), now, chk)
	return nil
}

// standAtJoin saves a joining node's first standing at once when its
// flagged provider bounds it, so that the node does not rank at the
// newcomer prior until the uptime measure first looks at it (within 5
// minutes of its coming online). Any other node's first standing is the
// prior, as its record says already. Errors are logged: that first look
// saves the standing anyway.
func (s *Server) standAtJoin(ctx context.Context, n *idlegrid.Node) {
	now := s.Now()
	f, err := s.boundOf(ctx, carriedOver(n, nil, now), now, nil)
	if err == nil && f != nil {
		err = s.recordFacts(ctx, n.ID, nil, standingDelta{})
	}
	if err != nil {
		s.log.Error("first standing of a joining node", "node", n.ID, "provider", n.ProviderID, "err", err)
	}
}

// boundOf is bounding, with the provider's saved standing, read only when
// node standing r's own evidence is thin, and then once for all the nodes
// of a provider that a reaper pass looks at (seen; nil: read it anew).
func (s *Server) boundOf(ctx context.Context, r *idlegrid.Reputation, now time.Time, seen *providersSeen) (*reputation.Flag, error) {
	if !s.trust.policy.Reputation.Thin(reputation.EvidenceOf(r), now) {
		return nil, nil
	}
	provider, err := s.seenStanding(ctx, seen, r.ProviderID)
	if err != nil {
		return nil, err
	}
	return s.bounding(ctx, r, provider, now)
}

// bounding is the flag of node standing r's provider when it bounds r's
// score at now (reputation.Params.NodeScore), or nil: when r's own
// evidence is thin, its provider's score (from provider, its standing;
// nil when it has none) is below r's own, and its provider is flagged.
// The provider's disputes are read only when the first two hold.
func (s *Server) bounding(ctx context.Context, r, provider *idlegrid.Reputation, now time.Time) (*reputation.Flag, error) {
	p := s.trust.policy.Reputation
	ev := reputation.EvidenceOf(r)
	if !p.Thin(ev, now) || p.Score(evidenceOf(provider), now) >= p.Score(ev, now) {
		return nil, nil
	}
	f, err := s.flagOfProvider(ctx, r.ProviderID, provider, now)
	if err != nil || !f.Flagged {
		return nil, err
	}
	return f, nil
}

// providerFlag is provider providerID's flag at now, from its saved
// standing, with its offences.
func (s *Server) providerFlag(ctx context.Context, providerID string, now time.Time) (*reputation.Flag, error) {
	provider, err := s.savedProvider(ctx, providerID)
	if err != nil {
		return nil, err
	}
	return s.flagOfProvider(ctx, providerID, provider, now)
}

// flagOfProvider is provider providerID's flag at now, from provider, its
// standing (nil when it has none), with its offences.
func (s *Server) flagOfProvider(ctx context.Context, providerID string, provider *idlegrid.Reputation, now time.Time) (*reputation.Flag, error) {
	offences, err := s.offences(ctx, &idlegrid.Reputation{Subject: idlegrid.SubjectProvider, SubjectID: providerID, ProviderID: providerID})
	if err != nil {
		return nil, err
	}
	f := s.trust.policy.Reputation.Flag(evidenceOf(provider), now).WithOffences(offences)
	return &f, nil
}

// savedProvider is a provider's saved standing, or nil when it has none.
func (s *Server) savedProvider(ctx context.Context, providerID string) (*idlegrid.Reputation, error) {
	r, err := s.store.FindReputation(ctx, idlegrid.SubjectProvider, providerID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, nil
	}
	return r, err
}

// evidenceOf is r's evidence, or a newcomer's when r is nil.
func evidenceOf(r *idlegrid.Reputation) reputation.Evidence {
	if r == nil {
		return reputation.Evidence{}
	}
	return reputation.EvidenceOf(r)
}

// restand sets r's counts, score and level from ev at now, and returns the
// level change to record, if any, with the assessment behind the level. A
// quarantined node holds level 0.
func (s *Server) restand(r *idlegrid.Reputation, ev reputation.Evidence, now time.Time, chk levelChecks) (*idlegrid.LevelChange, reputation.Assessment) {
	pol := s.trust.policy
	ev = pol.Reputation.DecayedTo(ev, now)
	r.Counts, r.CountsAt, r.UpdatedAt = countsOf(ev), ev.At, now
	r.Score = s.scoreOf(ev, now, chk)
	a := s.assess(r, ev, chk)
	held := r.Level
	r.Level, r.LevelName = a.Level, a.Name
	c, ok := pol.Levels.ChangeOf(r.SubjectID, held, a, now)
	if !ok {
		return nil, a
	}
	return &idlegrid.LevelChange{ID: idlegrid.NewID("lvl"), Subject: r.Subject, SubjectID: r.SubjectID,
		From: c.From, To: c.To, FromName: c.FromName, ToName: c.ToName, Reasons: c.Reasons, At: c.At}, a
}

// assess is the level r earns with its score, what it served, ev and chk.
func (s *Server) assess(r *idlegrid.Reputation, ev reputation.Evidence, chk levelChecks) reputation.Assessment {
	why := hardwareUnverified(ev, chk)
	st := reputation.Standing{Score: r.Score, GPUSecondsServed: r.GPUSecondsServed,
		HardwareVerified: why == "", HardwareNote: why, Quarantined: chk.quarantined, Held: chk.held, Current: r.Level}
	return s.trust.policy.Levels.Level(st)
}

// hardwareUnverified says why a standing's hardware is not verified, or ""
// when it is: the one rule behind its levels, its hardware-verified badge,
// its reputation's hardware_verified and the node's hardware note. ev is
// its evidence (decayed to the time judged) and chk its checks. The
// hardware is verified when its checks doubt nothing (for a node: every
// GPU it offers passed a challenge as offered, hardwareDoubt; for a
// provider: none of its nodes' saved standings doubts its hardware), some
// challenge passed, and no hardware challenge failed (or went unanswered)
// within about one half-life: the failed count, decayed, is below a half.
// A failed challenge also quarantines the node (attest.go), which holds it
// at level 0 meanwhile.
func hardwareUnverified(ev reputation.Evidence, chk levelChecks) string {
	switch {
	case chk.hardwareDoubt != "":
		return chk.hardwareDoubt
	case !hardwareVerified(ev):
		return fmt.Sprintf("a hardware challenge failed or went unanswered recently (%.2f failed, decayed; verified again below 0.5)",
			ev.Challenges.Bad)
	case ev.Challenges.Good <= 0:
		return "no hardware challenge has passed yet"
	}
	return ""
}

// hardwareVerified: no hardware challenge failed (or went unanswered)
// within about one half-life: the failed count, decayed, is below a half.
// It is one of hardwareUnverified's rules.
func hardwareVerified(ev reputation.Evidence) bool { return ev.Challenges.Bad < 0.5 }

func countsOf(ev reputation.Evidence) map[string]idlegrid.ReputationTally {
	out := make(map[string]idlegrid.ReputationTally, len(reputation.Dimensions))
	for _, d := range reputation.Dimensions {
		t := ev.Tally(d)
		out[string(d)] = idlegrid.ReputationTally{Good: t.Good, Bad: t.Bad}
	}
	return out
}

// expand turns a stored fact back into the facts it counts.
func expand(f idlegrid.ReputationFact) []reputation.Fact {
	one := reputation.Fact{Kind: reputation.FactKind(f.Kind), At: f.At, PromisedSeconds: f.PromisedSeconds, OnlineSeconds: f.OnlineSeconds}
	out := make([]reputation.Fact, max(f.Count, 1))
	for i := range out {
		out[i] = one
	}
	return out
}

// stale reports whether node n's standing r is due a save with no new
// fact: it has none yet (its first carries its lease record over), or
// decay has moved its score by a thousandth or more, or its level, since
// it was saved, the score of a thin node as its flagged provider bounds it
// (boundOf), so that the bound follows its provider's standing. Its
// challenges are read only when the level would move without them: a
// doubt about its hardware only holds a level down, the answer that
// raises one restands the node itself (afterChallenge), and so does an
// offer that changes a GPU's claim (offerChanged). Its provider's
// offence hold, read once a pass (seenHold), counts where the level is
// above 0 or would be: a hold that began moves a level to 0, and one that
// ended lets it rise again.
func (s *Server) stale(ctx context.Context, r *idlegrid.Reputation, n *idlegrid.Node, now time.Time, seen *providersSeen) (bool, error) {
	if r == nil {
		return true, nil
	}
	ev := reputation.EvidenceOf(r)
	bound, err := s.boundOf(ctx, r, now, seen)
	if err != nil {
		return false, err
	}
	score := s.scoreOf(ev, now, levelChecks{provider: bound})
	if math.Abs(score-r.Score) >= 0.001 {
		return true, nil
	}
	moved := *r
	moved.Score = score
	quick := levelChecks{quarantined: n.Quarantined}
	level := s.assess(&moved, ev, quick).Level
	if level > 0 || r.Level > 0 { // a hold takes a level to 0, so only then is it read
		if quick.held, err = s.seenHold(ctx, seen, n.ProviderID, now); err != nil {
			return false, err
		}
		level = s.assess(&moved, ev, quick).Level
	}
	if level == r.Level {
		return false, nil
	}
	chk, err := s.nodeChecks(ctx, n)
	if err != nil {
		return false, err
	}
	return s.assess(&moved, ev, chk).Level != r.Level, nil
}

// NodeReputation returns a node's reputation. Anyone signed in sees its
// standing (score, level, badges), as renters see its reliability in the
// market; the node's provider and admins also see the evidence, its facts,
// its level history and advice.
func (s *Server) NodeReputation(ctx context.Context, nodeID string) (*idlegrid.ReputationView, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	n, err := s.store.FindNode(ctx, nodeID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notFound("node", nodeID)
	} else if err != nil {
		return nil, err
	}
	now := s.Now()
	rep, err := s.store.FindReputation(ctx, idlegrid.SubjectNode, nodeID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		rep, err = carriedOver(n, nil, now), nil
	}
	if err != nil {
		return nil, err
	}
	chk, err := s.nodeChecks(ctx, n)
	if err != nil {
		return nil, err
	}
	ev := reputation.EvidenceOf(rep)
	if s.trust.policy.Reputation.Thin(ev, now) {
		if chk.provider, err = s.providerFlag(ctx, rep.ProviderID, now); err != nil {
			return nil, err
		}
	}
	offences, err := s.offences(ctx, rep)
	if err != nil {
		return nil, err
	}
	v, a := s.viewOf(rep, ev, now, chk, offences)
	if !c.IsAdmin() && c.AccountID != n.ProviderID {
		return v, nil
	}
	return v, s.detail(ctx, v, rep, ev, a, chk, offences, now, windowHours(&n.Schedule, now))
}

// ProviderReputation returns a provider's reputation: its nodes' evidence
// pooled, with one prior. As for a node, the evidence is for the provider
// and admins only.
func (s *Server) ProviderReputation(ctx context.Context, providerID string) (*idlegrid.ReputationView, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	acct, err := s.store.FindAccount(ctx, providerID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && acct.Role != idlegrid.RoleProvider) {
		return nil, notFound("provider", providerID)
	} else if err != nil {
		return nil, err
	}
	now := s.Now()
	rep, ev, err := s.providerStanding(ctx, providerID, nil)
	if err != nil {
		return nil, err
	}
	chk, err := s.providerChecks(ctx, providerID, nil)
	if err != nil {
		return nil, err
	}
	offences, err := s.offences(ctx, rep)
	if err != nil {
		return nil, err
	}
	v, a := s.viewOf(rep, ev, now, chk, offences)
	if !c.IsAdmin() && c.AccountID != providerID {
		return v, nil
	}
	return v, s.detail(ctx, v, rep, ev, a, chk, offences, now, 0)
}

// viewOf is the public part of a view: the score as of now (what the
// engine ranks a node by: scoreOf), the level in force and its badges.
// offences are its proven offences and quarantine (offences): with them,
// a flagged standing shows the badge "flagged", so that a renter sees it,
// and a thin node of a flagged provider is no clean newcomer.
func (s *Server) viewOf(rep *idlegrid.Reputation, ev reputation.Evidence, now time.Time, chk levelChecks, offences []string) (*idlegrid.ReputationView, reputation.Assessment) {
	pol := s.trust.policy
	score := s.scoreOf(ev, now, chk)
	current := *rep
	current.Score = score
	a := s.assess(&current, pol.Reputation.DecayedTo(ev, now), chk)
	v := &idlegrid.ReputationView{Subject: rep.Subject, SubjectID: rep.SubjectID, ProviderID: rep.ProviderID,
		Score: score, Level: rep.Level, LevelName: pol.Levels.Name(rep.Level), AsOf: now,
		PolicyVersion: pol.Version, PolicySHA256: pol.SHA256}
	v.Badges = append(v.Badges, v.LevelName)
	if pol.Gold.Allows(rep.Level) && !chk.quarantined { // a quarantined node takes no lease, gold least of all
		v.Badges = append(v.Badges, "gold")
	}
	if hardwareUnverified(pol.Reputation.DecayedTo(ev, now), chk) == "" {
		v.Badges = append(v.Badges, "hardware-verified")
	}
	if s.flagOf(ev, now, chk, offences).Flagged {
		v.Badges = append(v.Badges, "flagged")
	}
	return v, a
}

// flagOf is a standing's flag at now (docs/trust.md, "The flag"): its
// evidence's, with its offences, and for a thin node its flagged
// provider's (reputation.Flag.OnProvider), as its advice ends with it.
func (s *Server) flagOf(ev reputation.Evidence, now time.Time, chk levelChecks, offences []string) reputation.Flag {
	p := s.trust.policy.Reputation
	f := p.Flag(ev, now).WithOffences(offences)
	if chk.provider != nil && p.Thin(ev, now) {
		f = f.OnProvider(*chk.provider)
	}
	return f
}

// detail fills in the evidence behind v, for its owner.
func (s *Server) detail(ctx context.Context, v *idlegrid.ReputationView, rep *idlegrid.Reputation, ev reputation.Evidence,
	a reputation.Assessment, chk levelChecks, offences []string, now time.Time, windowHours float64) error {
	pol := s.trust.policy
	p := pol.Reputation
	decayed := p.DecayedTo(ev, now)
	d := &idlegrid.ReputationDetail{
		Formula: p.Formula(ev, now), GPUHoursServed: float64(rep.GPUSecondsServed) / 3600,
		HardwareVerified: hardwareUnverified(decayed, chk) == "", LevelReasons: a.Reasons,
	}
	for _, dim := range reputation.Dimensions {
		t, w := decayed.Tally(dim), p.Weights[dim]
		d.Dimensions = append(d.Dimensions, idlegrid.ReputationCount{Dimension: string(dim), Good: t.Good, Bad: t.Bad,
			WeightGood: w.Good, WeightBad: w.Bad})
	}
	in := reputation.ExplainInput{Evidence: ev, Now: now, WindowHours: windowHours, Offences: offences, Provider: chk.provider}
	for _, r := range pol.Levels.Rules {
		if r.Level == rep.Level+1 {
			in.Target, in.TargetName = r.MinScore, fmt.Sprintf("level %d (%s)", r.Level, r.Name)
		}
	}
	for _, x := range p.Explain(in) {
		d.Advice = append(d.Advice, idlegrid.ReputationAdvice{Dimension: string(x.Dimension), Text: x.Text, Effect: x.Effect})
	}
	var err error
	if rep.Subject == idlegrid.SubjectNode {
		if d.Facts, err = s.store.ListReputationFacts(ctx, rep.SubjectID, viewFacts); err != nil {
			return err
		}
	}
	if d.LevelChanges, err = s.store.ListLevelChanges(ctx, rep.Subject, rep.SubjectID, viewChanges); err != nil {
		return err
	}
	v.Detail = d
	return nil
}

// offences are, in words, the proven offences (upheld disputes) of a
// provider, or of a node, and the node's quarantine in force: each flags
// it whatever its score (docs/trust.md, "The flag").
func (s *Server) offences(ctx context.Context, rep *idlegrid.Reputation) ([]string, error) {
	ds, err := s.store.ListDisputes(ctx, idlegrid.DisputeFilter{ProviderID: rep.ProviderID,
		States: []idlegrid.DisputeState{idlegrid.DisputeUpheld}, Limit: everyRow})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range ds {
		if rep.Subject == idlegrid.SubjectProvider || d.NodeID == rep.SubjectID {
			upheld := d.CreatedAt
			if d.ResolvedAt != nil {
				upheld = *d.ResolvedAt
			}
			out = append(out, fmt.Sprintf("dispute %s upheld (%s, %s)", d.ID, d.Offence, upheld.UTC().Format(time.DateOnly)))
		}
	}
	if rep.Subject != idlegrid.SubjectNode {
		return out, nil
	}
	q, err := s.store.FindQuarantine(ctx, rep.SubjectID)
	switch {
	case err == nil:
		out = append(out, fmt.Sprintf("in quarantine since %s: %s", q.Since.UTC().Format(time.DateOnly), q.Reason))
	case idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND:
		return nil, err
	}
	return out, nil
}

// windowHours is the length of the node's next promised window, for advice
// that speaks of windows; 0 when it is always offered or never.
func windowHours(sc *idlegrid.Schedule, now time.Time) float64 {
	if sc.Mode == idlegrid.ScheduleAlways {
		return 0
	}
	spans := reputation.PromisedSpans(sc, now, now.Add(8*24*time.Hour))
	if len(spans) == 0 {
		return 0
	}
	sp := spans[0]
	if len(spans) > 1 {
		sp = spans[1] // the first may have begun already
	}
	return math.Round(sp.End.Sub(sp.Start).Hours()*10) / 10
}

// TrustPolicyView returns the trust policy in force; anyone signed in may
// read it.
func (s *Server) TrustPolicyView(ctx context.Context) (*idlegrid.TrustPolicyView, error) {
	if _, err := account(ctx); err != nil {
		return nil, err
	}
	pol := s.trust.policy
	p := pol.Reputation
	v := &idlegrid.TrustPolicyView{Version: pol.Version, SHA256: pol.SHA256, GoldMinLevel: pol.Gold.MinLevel,
		PriorGood: p.PriorGood, PriorBad: p.PriorBad, HalfLifeHours: p.HalfLife.Hours(), DemotionMargin: pol.Levels.DemotionMargin,
		OffenceHoldHours: pol.Levels.OffenceHold.Hours(), ComplaintWindowHours: s.cfg.ComplaintWindow.Hours()}
	for _, d := range reputation.Dimensions {
		w := p.Weights[d]
		v.Weights = append(v.Weights, idlegrid.ReputationCount{Dimension: string(d), WeightGood: w.Good, WeightBad: w.Bad})
	}
	for _, r := range pol.Levels.Rules {
		v.Levels = append(v.Levels, idlegrid.TrustLevelRule{Level: r.Level, Name: r.Name, MinScore: r.MinScore,
			MinGPUHours: r.MinGPUHours, VerifiedHardware: r.VerifiedHardware})
	}
	return v, nil
}
