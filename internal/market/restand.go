package market

import (
	"github.com/idlegrid/idlegrid"
)

// A lease's end changes its node's reputation, and so its reliability and
// its place in its shelves' order. Taking the node off its shelves and
// putting it back marks each for a rebuild, a sort of the whole class at
// the next search; a busy market, whose leases end as fast as it places
// them, would rebuild shelves at nearly every placement. A node whose new
// record changes only what its reputation decides (reliability and trust
// level, and so maybe whether it may run gold) instead moves to its new
// place on each shelf, shifting the nodes between (restand).

// maxRestandShift is how far a node may move along a shelf in place; a
// longer move marks the shelf for a rebuild instead.
const maxRestandShift = 4096

// restandOnly reports whether n, the new record of nd's node, differs
// from the one the engine indexed only in what restand handles: the same
// provider and offer. It compares with the engine's own copy of the
// offer, not nd.n, which a caller may have changed in place before
// passing it again.
func (e *Engine) restandOnly(nd *node, n *idlegrid.Node) bool {
	return nd.n != nil && nd.cls != nil && n.ProviderID == nd.provider && n.Offer.Equal(&nd.offer)
}

// restand takes n, whose reliability and level may differ from nd's, and
// moves nd to its new place on each of its shelves.
func (e *Engine) restand(nd *node, n *idlegrid.Node) {
	if n.Level != nd.n.Level {
		e.levelGen++ // wait reasons count the nodes below a job's trust level
	}
	nd.n = n
	rel, views := clampReliability(n.Reliability), viewsOf(nd, e.cfg)
	if rel == nd.rel && views == nd.views {
		return // nothing the index reads changed
	}
	oldRel, oldViews := nd.rel, nd.views
	if views != nd.views { // it may run gold now, or no longer
		for _, s := range nd.shelves {
			s.reView(nd, nd.views, views)
		}
		nd.views = views
		e.memberGen++ // wait reasons count the views
	}
	nd.rel = rel
	nd.setPrices(nd.pct) // its scores, key and base entry
	for i, s := range nd.shelves {
		s.restand(nd, int(nd.pos[i]), oldRel, oldViews)
	}
	e.touch(nd) // writes its new entry where it now stands
}

// restand moves nd, whose key changed, from position from to its place in
// the shelf's order, shifting the nodes between and rewriting their
// entries and the sums above them; nd's entry stays its old one, which
// touch then rewrites. A dirty shelf is left to its rebuild, and a long
// move marks the shelf dirty. What searches cached of the shelf (fits,
// powers, ranked lists) is invalidated by a new gen; the move is logged,
// with the reliability and views nd had, for the ranked lists.
func (s *shelf) restand(nd *node, from int, oldRel float64, oldViews uint8) {
	if s.dirty {
		return
	}
	if from < 0 || from >= len(s.order) || s.order[from] != nd {
		s.markDirty()
		return
	}
	to := from
	for to > 0 && compareOrder(nd, s.order[to-1]) < 0 {
		if to--; from-to > maxRestandShift {
			s.markDirty()
			return
		}
	}
	for to < len(s.order)-1 && compareOrder(s.order[to+1], nd) < 0 {
		if to++; to-from > maxRestandShift {
			s.markDirty()
			return
		}
	}
	lo, hi := min(from, to), max(from, to)
	if to < from {
		copy(s.order[to+1:from+1], s.order[to:from])
	} else {
		copy(s.order[from:to], s.order[from+1:to+1])
	}
	s.order[to] = nd
	for k := lo; k <= hi; k++ {
		x := s.order[k]
		*x.posIn(s) = int32(k)
		s.leaves[k], s.leafPlans[k] = x.leaf, x.leafPlan
	}
	s.resum(lo>>blockShift, hi>>blockShift)
	for t := range tierCount {
		if nd.inView(t) {
			s.relMin[t] = min(s.relMin[t], lowFloat32(nd.rel))
			s.lowerAsk(t, nd.asks[t])
			s.ordered[t] = s.ordered[t] && s.orderedAround(t, to)
		}
	}
	s.gen++
	s.logMove(moveRec{nd: nd, gen: s.gen, oldRel: oldRel, oldViews: oldViews})
}

// maxMoves bounds a shelf's log of moves; past it the log starts again,
// and lists made before are reranked whole.
const maxMoves = 256

// moveRec is a logged restand: nd moved at the shelf's gen gen, from
// reliability oldRel and views oldViews (its asks did not change).
type moveRec struct {
	nd       *node
	gen      uint64
	oldRel   float64
	oldViews uint8
}

func (s *shelf) logMove(m moveRec) {
	if len(s.moves) >= maxMoves {
		s.moves, s.movesSince = s.moves[:0], s.gen
		return
	}
	s.moves = append(s.moves, m)
}

// reView counts a node in the tier views it joined and not in those it
// left (its views were old, are now).
func (s *shelf) reView(nd *node, old, now uint8) {
	s.countView(nd, now&^old, 1)
	s.countView(nd, old&^now, -1)
	s.askStale |= old &^ now // a node that left a view may have been its least ask
}

// resum recomputes the sums of blocks first to last and the tree above.
func (s *shelf) resum(first, last int) {
	for j := first; j <= last; j++ {
		s.agg[s.size+j], s.plan[s.size+j] = s.sumBlock(j), s.sumBlockPlan(j)
	}
	for a, b := (s.size+first)/2, (s.size+last)/2; a >= 1; a, b = a/2, b/2 {
		for k := a; k <= b; k++ {
			s.agg[k] = combine(s.agg[2*k], s.agg[2*k+1])
			s.plan[k] = combinePlan(s.plan[2*k], s.plan[2*k+1])
		}
	}
	s.root = s.agg[1]
}

// orderedAround reports whether tier t's weight-1 scores still never fall
// along the order around position p: against the nearest nodes of the
// tier's view on either side.
func (s *shelf) orderedAround(t, p int) bool {
	x := s.order[p].s1[t]
	for k := p - 1; k >= 0; k-- {
		if s.order[k].inView(t) {
			if s.order[k].s1[t] > x {
				return false
			}
			break
		}
	}
	for k := p + 1; k < len(s.order); k++ {
		if s.order[k].inView(t) {
			return s.order[k].s1[t] >= x
		}
	}
	return true
}
