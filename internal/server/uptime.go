package server

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/reputation"
)

// The uptime measure (docs/trust.md, "Uptime"): each promised window that
// ended is measured against the heartbeats heard in it, and a standing
// that decay has moved is saved again.
//
// A reaper pass runs every heartbeat interval, but a node has something to
// measure only when one of its promised spans ends, and its standing
// decays slowly. So the pass does not read every node: it keeps, for each
// node it watches, when it should next look at it (uptimeTrack.due), and
// reads only the nodes due. A look sets the next one at the end of the
// node's next promised span, or sooner, within lookEvery, to save a
// decayed standing; a node whose offer changes, or that leaves the online
// nodes, is looked at in the next pass. In a market of 10,000 nodes a
// reaper pass that read them all took 0.4 s, and now takes 0.06 s
// (BenchmarkReap, BENCHMARKS.md).

// uptimeTrack is what this coordinator knows of a node it watches. The
// heartbeats themselves are kept in the store as they arrive
// (noteHeartbeat); a coordinator judges only the time it watched, since a
// heartbeat sent while it was down was heard by nobody.
type uptimeTrack struct {
	since time.Time // when this process began watching the node
	due   time.Time // when the uptime pass next looks at the node
	away  bool      // the node was not online at the last pass
}

const (
	// lostWatch is how long after its last heartbeat the promised windows
	// of a node lost, or offline (its agent said goodbye), still count
	// against it; after that it is taken as gone, and measured again when
	// it returns.
	lostWatch = 24 * time.Hour
	// lookEvery bounds the time between two looks at a node, for decay:
	// each look sets the next between half of it and all of it from now,
	// spread by the node's ID so that nodes first seen together do not
	// stay due together.
	lookEvery = 10 * time.Minute
	// spanHorizon is how far ahead a look seeks the end of the node's next
	// promised span; one further off is found by a later look.
	spanHorizon = 25 * time.Hour
)

// measureUptime is the reaper's uptime pass. online is the online nodes
// (by ID, as the pass's node rule left them): those not yet watched are
// watched from now on, and each watched node that is due is looked at. A
// node lost or offline is measured for lostWatch after its last heartbeat:
// a goodbye takes a node off the market, not out of its promised windows.
func (s *Server) measureUptime(ctx context.Context, online map[string]time.Time) error {
	now := s.Now()
	var errs []error
	seen := newProvidersSeen()
	for _, id := range s.uptimeDue(online, now) {
		if ctx.Err() != nil {
			break // the rest are looked at by the next pass
		}
		if err := s.lookAtUptime(ctx, id, now, seen); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// uptimeDue watches the online nodes not yet watched, marks those watched
// that left the online nodes due, and returns the watched nodes due by now,
// sorted.
func (s *Server) uptimeDue(online map[string]time.Time, now time.Time) []string {
	s.trust.umu.Lock()
	defer s.trust.umu.Unlock()
	for id := range online {
		if tr := s.trust.uptime[id]; tr == nil {
			s.trust.uptime[id] = &uptimeTrack{since: now, due: now.Add(spread(id, lookEvery/2))}
		} else {
			tr.away = false
		}
	}
	var due []string
	for id, tr := range s.trust.uptime {
		if _, on := online[id]; !on && !tr.away { // lost, or said goodbye: which, the look says
			tr.away, tr.due = true, now
		}
		if !tr.due.After(now) {
			due = append(due, id)
		}
	}
	slices.Sort(due)
	return due
}

// lookAtUptime measures node id's promised spans that ended, saves its
// standing when there are facts or decay moved it, and sets its next look.
// A node no longer watched (gone, retired, or lost or offline too long)
// is forgotten. seen holds the providers' standings the pass has read.
func (s *Server) lookAtUptime(ctx context.Context, id string, now time.Time, seen *providersSeen) error {
	s.trust.mmu.Lock()
	defer s.trust.mmu.Unlock()
	n, err := s.store.FindNode(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		s.unwatch(id)
		return nil
	} else if err != nil {
		return err
	}
	since, watched := s.watch(n, now)
	if !watched {
		return nil
	}
	rep, from, err := s.uptimeFrom(ctx, id, since)
	if err != nil {
		return err
	}
	facts, through, err := s.observe(ctx, n, from, now, false)
	if err != nil {
		return err
	}
	if err := s.saveUptime(ctx, n, rep, facts, through, now, seen); err != nil {
		return err
	}
	if through.After(from) {
		from = through
	}
	s.nextLook(id, nextLook(&n.Schedule, from, now, id))
	return nil
}

// saveUptime saves node n's standing rep with the window facts that ended
// through, or with none when decay moved it. The save moves its
// provider's standing too, which seen then forgets.
func (s *Server) saveUptime(ctx context.Context, n *idlegrid.Node, rep *idlegrid.Reputation, facts []idlegrid.ReputationFact, through, now time.Time, seen *providersSeen) error {
	if len(facts) == 0 {
		if stale, err := s.stale(ctx, rep, n, now, seen); err != nil || !stale {
			return err
		}
	}
	seen.moved(n.ProviderID)
	return s.recordFacts(ctx, n.ID, facts, standingDelta{through: through})
}

// uptimeFrom returns node id's saved reputation (nil: none yet) and where
// its uptime is next measured from: where the last measure ended, or
// since, when this coordinator began watching it, if later.
func (s *Server) uptimeFrom(ctx context.Context, id string, since time.Time) (*idlegrid.Reputation, time.Time, error) {
	rep, err := s.store.FindReputation(ctx, idlegrid.SubjectNode, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, since, nil
	} else if err != nil {
		return nil, time.Time{}, err
	}
	if rep.UptimeThrough.After(since) {
		return rep, rep.UptimeThrough, nil
	}
	return rep, since, nil
}

// observe returns the window facts of node n's promised spans that ended
// between from and now, against the heartbeats heard in them, and where
// they end. With cut, a span still open at now is measured up to now, as
// if it ended then.
func (s *Server) observe(ctx context.Context, n *idlegrid.Node, from, now time.Time, cut bool) ([]idlegrid.ReputationFact, time.Time, error) {
	spans := reputation.PromisedSpans(&n.Schedule, from, now)
	if k := len(spans); k > 0 && !spans[k-1].End.Before(now) && !cut {
		spans = spans[:k-1] // still open: measured when it ends
	}
	if len(spans) == 0 {
		return nil, time.Time{}, nil
	}
	heard, err := s.heardSpans(ctx, n.ID, spans[0].Start, spans[len(spans)-1].End)
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []idlegrid.ReputationFact
	for _, f := range reputation.WindowFacts(spans, heard) {
		out = append(out, storedFact(n.ID, "window:"+n.ID+":"+strconv.FormatInt(f.At.UnixMicro(), 10), "", f, 1))
	}
	return out, spans[len(spans)-1].End, nil
}

// measureBeforeSchedule measures node n's uptime under the schedule in
// force, n.Schedule, up to now, before its schedule changes to next: the
// promised spans that ended since it was last measured, and the one still
// open cut at now, against the heartbeats heard; its standing is then
// measured through now, and later looks measure under the new schedule
// from there. So a schedule change never reaches back: it neither promises
// hours that were not promised nor takes back a window the node missed
// before the window was measured. Nothing is measured when next is the
// schedule in force, or for a node this coordinator does not watch. The
// caller holds s.trust.mmu from before it read n until the schedule is
// changed, so that no look comes between.
func (s *Server) measureBeforeSchedule(ctx context.Context, n *idlegrid.Node, next idlegrid.Schedule, now time.Time) error {
	if sameSchedule(&n.Schedule, &next) {
		return nil
	}
	since, watched := s.watch(n, now)
	if !watched {
		return nil
	}
	_, from, err := s.uptimeFrom(ctx, n.ID, since)
	if err != nil {
		return err
	}
	if !now.After(from) {
		return nil
	}
	facts, _, err := s.observe(ctx, n, from, now, true)
	if err != nil {
		return err
	}
	return s.recordFacts(ctx, n.ID, facts, standingDelta{through: now})
}

// sameSchedule reports whether a and b offer the same windows, as
// idlegrid.Offer.Equal compares them.
func sameSchedule(a, b *idlegrid.Schedule) bool {
	x, y := idlegrid.Offer{Schedule: *a}, idlegrid.Offer{Schedule: *b}
	return x.Equal(&y)
}

// nextLook is when a node measured up to from, on schedule sc, should
// next be looked at: when its next promised span ends (a span that
// outlasts a day is measured a day at a time, reputation.PromisedSpans),
// or within lookEvery, whichever is sooner.
func nextLook(sc *idlegrid.Schedule, from, now time.Time, id string) time.Time {
	next := now.Add(lookEvery/2 + spread(id, lookEvery/2))
	if day := from.Add(24 * time.Hour); day.After(now) && day.Before(next) {
		next = day
	}
	for _, sp := range reputation.PromisedSpans(sc, from, now.Add(spanHorizon)) {
		if !sp.End.Before(now) && sp.End.Before(now.Add(spanHorizon)) { // one ending now is measured by the next pass
			return minTime(next, sp.End)
		}
	}
	return next
}

// spread is a share of d fixed by id.
func spread(id string, d time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64() % uint64(d))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// watch notes that this coordinator watches n from now on, unless it
// already does, and returns since when; watched is false for a node
// retired, or lost or offline long ago, which is forgotten until it
// returns.
func (s *Server) watch(n *idlegrid.Node, now time.Time) (since time.Time, watched bool) {
	s.trust.umu.Lock()
	defer s.trust.umu.Unlock()
	away := n.State == idlegrid.NodeLost || n.State == idlegrid.NodeOffline
	if !(n.State == idlegrid.NodeOnline || (away && now.Sub(n.LastHeartbeat) <= lostWatch)) {
		delete(s.trust.uptime, n.ID)
		return time.Time{}, false
	}
	tr := s.trust.uptime[n.ID]
	if tr == nil {
		tr = &uptimeTrack{since: now}
		s.trust.uptime[n.ID] = tr
	}
	return tr.since, true
}

// unwatch forgets a node that is gone.
func (s *Server) unwatch(id string) {
	s.trust.umu.Lock()
	defer s.trust.umu.Unlock()
	delete(s.trust.uptime, id)
}

// nextLook sets when the uptime pass next looks at node id, if watched.
func (s *Server) nextLook(id string, at time.Time) {
	s.trust.umu.Lock()
	defer s.trust.umu.Unlock()
	if tr := s.trust.uptime[id]; tr != nil {
		tr.due = at
	}
}

// lookSoon has the next uptime pass look at node id, whose offer changed.
func (s *Server) lookSoon(id string) { s.nextLook(id, time.Time{}) }

// watchedSince returns since when this coordinator has watched a node (the
// zero time when it does not).
func (s *Server) watchedSince(nodeID string) time.Time {
	s.trust.umu.Lock()
	defer s.trust.umu.Unlock()
	if tr := s.trust.uptime[nodeID]; tr != nil {
		return tr.since
	}
	return time.Time{}
}
