package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// The offence hold (docs/trust.md, "The offence hold"): for the trust
// policy's levels.offence_hold after one of its offences is upheld, every
// node of a provider, and the provider, hold level 0 whatever their
// record, and so take no gold work. An upheld dispute restands the
// provider's nodes at once (restandProvider); each later save of a node's
// standing reads the hold (nodeChecks), and the reaper's staleness check
// (stale) reads it once a pass for each provider, so that a hold that
// ended promotes the provider's online nodes again within their next look.

// offenceHold says why provider providerID's nodes are held at level 0 at
// now: the offence of its dispute upheld last, while within the hold; ""
// when none is.
func (s *Server) offenceHold(ctx context.Context, providerID string, now time.Time) (string, error) {
	hold := s.trust.policy.Levels.OffenceHold
	if hold <= 0 {
		return "", nil
	}
	ds, err := s.store.ListDisputes(ctx, idlegrid.DisputeFilter{ProviderID: providerID,
		States: []idlegrid.DisputeState{idlegrid.DisputeUpheld}, UpheldAfter: now.Add(-hold), Limit: everyRow})
	if err != nil {
		return "", err
	}
	var last *idlegrid.Dispute
	for _, d := range ds {
		if upheldAt(d).Add(hold).After(now) && (last == nil || upheldAt(d).After(upheldAt(last))) {
			last = d
		}
	}
	if last == nil {
		return "", nil
	}
	return fmt.Sprintf("dispute %s (%s) of provider %s upheld on %s: every node of the provider until %s, whatever its record",
		last.ID, last.Offence, providerID, upheldAt(last).UTC().Format(time.DateOnly),
		upheldAt(last).Add(hold).UTC().Format(time.RFC3339)), nil
}

// upheldAt is when d was upheld: when it was resolved, or, convicted by
// the market at once, when it was opened.
func upheldAt(d *idlegrid.Dispute) time.Time {
	if d.ResolvedAt != nil {
		return *d.ResolvedAt
	}
	return d.CreatedAt
}

// restandProvider saves again the standing of every node of an upheld
// dispute's provider, and with them the provider's, so that the offence
// hold takes their levels, and gold work, at once rather than at each
// node's next save. It runs off the request that upheld the dispute, in
// the restander (runRestands), and again from the dispute's follow-up
// (holdFollowUp) when it failed or was never done: a node restood twice
// is saved as it was. Errors are joined; it stops when ctx is done.
func (s *Server) restandProvider(ctx context.Context, d *idlegrid.Dispute) error {
	if s.trust.policy.Levels.OffenceHold <= 0 {
		return nil
	}
	nodes, err := s.store.ListNodes(ctx, idlegrid.NodeFilter{ProviderID: d.ProviderID})
	if err != nil {
		return fmt.Errorf("list the provider's nodes: %w", err)
	}
	var errs []error
	for _, n := range nodes {
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		if n.State == idlegrid.NodeRetired {
			continue
		}
		if err := s.recordFacts(ctx, n.ID, nil, standingDelta{}); err != nil {
			errs = append(errs, fmt.Errorf("restand node %s: %w", n.ID, err))
		}
	}
	return errors.Join(errs...)
}

// holdFollowUp is the follow-up of dispute disputeID's upholding at now,
// stored with it: the restand of its provider's nodes; nil when the trust
// policy holds nothing.
func (s *Server) holdFollowUp(disputeID string, now time.Time) *idlegrid.FollowUp {
	if s.trust.policy.Levels.OffenceHold <= 0 {
		return nil
	}
	return &idlegrid.FollowUp{ID: holdFollowUpID(disputeID), Kind: followUpProviderHeld, Body: "{}",
		DueAt: now.Add(followUpDelay), CreatedAt: now}
}

func holdFollowUpID(disputeID string) string { return "hold:" + disputeID }

// restandQueue is how many upheld disputes wait for the restander before
// the next is left to the reaper.
const restandQueue = 256

// restandSoon hands the restand of upheld dispute d's provider to the
// restander, so that the request that upheld it need not wait for every
// node. When the restander's queue is full the reaper does it from the
// dispute's follow-up, once due.
func (s *Server) restandSoon(d *idlegrid.Dispute) {
	if s.trust.policy.Levels.OffenceHold <= 0 {
		return
	}
	select {
	case s.restands <- d:
	default:
		s.log.Warn("offence hold: the restander is behind; left to the reaper", "dispute", d.ID, "provider", d.ProviderID)
	}
}

// runRestands restands the providers of the upheld disputes handed to it
// (restandSoon), one at a time, and removes each one's follow-up once
// done, until ctx is done.
func (s *Server) runRestands(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-s.restands:
			err := s.restandProvider(ctx, d)
			if err != nil && ctx.Err() == nil {
				s.log.Error("offence hold: restand the provider", "dispute", d.ID, "provider", d.ProviderID, "err", err)
			}
			s.followed(ctx, &idlegrid.FollowUp{ID: holdFollowUpID(d.ID)}, err)
		}
	}
}

// redoProviderHeld restands again the provider of an upheld dispute, from
// the stored dispute, as the reaper found its follow-up.
func (s *Server) redoProviderHeld(ctx context.Context, f *idlegrid.FollowUp) error {
	id, ok := strings.CutPrefix(f.ID, "hold:")
	if !ok {
		return errors.New("not an offence hold's follow-up")
	}
	d, err := s.store.FindDispute(ctx, id)
	if err != nil {
		return err
	}
	if d.State != idlegrid.DisputeUpheld { // a store keeps a hold's follow-up with an upheld dispute only
		s.log.Warn("offence hold follow-up of a dispute not upheld: nothing to hold", "dispute", d.ID, "state", d.State)
		return nil
	}
	s.log.Info("offence hold follow-up done again", "dispute", d.ID, "provider", d.ProviderID, "tries", f.Tries)
	return s.restandProvider(ctx, d)
}

// providersSeen is what a reaper pass read of providers, by provider ID,
// so that its looks at many nodes of one provider read each once: their
// saved standings (nil: none saved), which a thin node's score is bounded
// by (boundOf), and their offence holds (stale). A node's save moves its
// provider's standing, so the pass forgets that then (saveUptime); a nil
// *providersSeen reads everything anew.
type providersSeen struct {
	standings map[string]*idlegrid.Reputation
	holds     map[string]string
}

func newProvidersSeen() *providersSeen {
	return &providersSeen{standings: map[string]*idlegrid.Reputation{}, holds: map[string]string{}}
}

// moved forgets provider providerID's standing, which a node's save moved.
func (p *providersSeen) moved(providerID string) {
	if p != nil {
		delete(p.standings, providerID)
	}
}

// seenStanding is provider providerID's saved standing (nil: none), read
// once a pass.
func (s *Server) seenStanding(ctx context.Context, seen *providersSeen, providerID string) (*idlegrid.Reputation, error) {
	if seen != nil {
		if r, ok := seen.standings[providerID]; ok {
			return r, nil
		}
	}
	r, err := s.savedProvider(ctx, providerID)
	if err == nil && seen != nil {
		seen.standings[providerID] = r
	}
	return r, err
}

// seenHold is provider providerID's offence hold at now, read once a pass.
func (s *Server) seenHold(ctx context.Context, seen *providersSeen, providerID string, now time.Time) (string, error) {
	if seen != nil {
		if h, ok := seen.holds[providerID]; ok {
			return h, nil
		}
	}
	h, err := s.offenceHold(ctx, providerID, now)
	if err == nil && seen != nil {
		seen.holds[providerID] = h
	}
	return h, err
}
