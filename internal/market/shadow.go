package market

import (
	"math"
	"slices"

	"github.com/idlegrid/idlegrid"
)

// shadow is the search for a shadow runner-up: when no free node was left
// out, the winners are priced against the best busy competitor instead of
// the cap (see docs/market.md, "Saturation: the shadow runner-up").
type shadow struct {
	q       *query
	winners []cand
	floor   float64 // the worst winner's score: a competitor scores at least this
	pref    bool    // the winners are in the job's preferred region
	best    cand
	found   bool
}

// shadowRunnerUp returns the node whose score prices winners when no free
// node was left out: among the nodes that pass every constraint their
// offer and record decide (free GPUs, reservations and open windows
// aside), other than the winners and their providers' nodes, in the
// winners' preference group, the one with the least score at or above the
// worst winner's. A cheaper busy node would only pay a winner its own ask,
// so that asking more would pay more; and a provider's own busy nodes
// could raise its price by their asks. It returns false when there is
// none: then the cap sets the price.
func (e *Engine) shadowRunnerUp(q *query, winners []cand) (cand, bool) {
	if q.sig == nil {
		return cand{}, false
	}
	x := shadow{q: q, winners: winners, floor: math.Inf(-1)}
	for i := range winners {
		x.floor = max(x.floor, winners[i].score)
	}
	switch r := q.job.Region; {
	case !q.job.RegionPreferred:
		x.searchClasses(q.sig.entries)
	case winners[0].nd.n.Region == r:
		x.pref = true
		x.searchClasses(q.sig.byRegion[r]) // preferred winners compete only among themselves
	default:
		for _, o := range q.sig.regions { // and winners that fell back only among the others
			if o != r {
				x.searchClasses(q.sig.byRegion[o])
			}
		}
	}
	if nd := e.checkpointNode(q); nd != nil && x.inGroup(nd.n.Region) && e.direct(q, q.sig, "", nd) {
		x.offer(nd) // its credit, which the ranked lists leave out, may make it compete
	}
	if len(q.job.Datasets) == 0 {
		return x.best, x.found
	}
	// Nodes caching the job's data, with their credit.
	credit := e.maxCredit(q)
	for i, ds := range q.job.Datasets {
		if slices.ContainsFunc(q.job.Datasets[:i], func(d idlegrid.Dataset) bool { return d.Name == ds.Name }) {
			continue
		}
		for _, c := range e.subShelves(q.sig, ds.Name) {
			if x.inGroup(c.region) && (c.maxJob == 0 || c.maxJob >= q.dur) {
				x.searchShelf(c.sh, credit)
			}
		}
	}
	return x.best, x.found
}

// searchClasses offers x the competitors on the shelves of classes that
// allow the job's duration.
func (x *shadow) searchClasses(classes []sigEntry) {
	for i := range classes {
		if c := &classes[i]; c.maxJob == 0 || c.maxJob >= x.q.dur {
			x.searchRanked(c.sh)
		}
	}
}

// inGroup reports whether nodes of region r are in the winners'
// preference group: with a preferred region, the winners compete only
// with the nodes on their side of it, there or elsewhere.
func (x *shadow) inGroup(r string) bool {
	return !x.q.job.RegionPreferred || (r == x.q.job.Region) == x.pref
}

// searchShelf offers x the competitors on a sub-shelf: the nodes of a
// class that cache one of the job's datasets, whose credit the ranked
// lists of class shelves leave out. In an ordered view it starts where
// the weight-1 scores reach the floor, scaled by ceilingFactor (no node
// before can score that much), and stops where no node left can beat the
// best found or ask within the cap. Any view skips the blocks and nodes
// whose entries rule them out, so that it reads only the nodes that might
// compete. Sub-shelves are small: a walk of one is cheap.
func (x *shadow) searchShelf(s *shelf, credit idlegrid.Micros) {
	q := x.q
	s.clean()
	ti := q.ti
	least := s.plan[1].s1[ti]
	if least == noScore {
		return // no node of the class is in the tier's view
	}
	f, off := scale(q, s, credit)
	relMin := float64(s.relMin[ti])
	if x.past(least, f, off, relMin) {
		return
	}
	ordered, start := s.ordered[ti], 0
	if ordered {
		start = s.firstAtLeast(ti, x.floor*ceilingFactor(q.w, relMin))
	}
	for j := start / blockLen; j*blockLen < len(s.order); j++ {
		if least := s.plan[s.size+j].s1[ti]; least == noScore {
			continue // no node of the block is in the view
		} else if x.past(least, f, off, relMin) {
			if ordered {
				return // every block after scores at least as much
			}
			continue
		}
		for pos := j * blockLen; pos < s.blockEnd(j); pos++ {
			if least := s.leafPlans[pos].s1[ti]; least == noScore {
				continue
			} else if x.past(least, f, off, relMin) {
				if ordered {
					return // every node after scores at least as much
				}
				continue
			}
			x.offer(s.order[pos])
		}
	}
}

// ceilingFactor is the most a node's score can be, for weight w, as a
// share of its weight-1 score: ask/rel^w − credit is at most
// (ask/rel)·rel^(1-w), and for w above 1 that factor is largest at the
// view's lowest reliability. A node whose weight-1 score is below
// floor·ceilingFactor cannot reach the floor.
func ceilingFactor(w, relMin float64) float64 {
	if w <= 1 {
		return 1
	}
	return relPow(relMin, w-1)
}

// past reports whether nodes whose weight-1 scores are at least least,
// rounded down as the index keeps them, can neither beat the best found
// nor ask within the cap. f, off and relMin scale the weight-1 score to a
// bound on the job's score and ask, as in a walk.
func (x *shadow) past(least score32, f, off, relMin float64) bool {
	s1 := least.float()
	return (x.found && beyond(s1*f-off, x.best.score)) || beyond(s1*relMin, float64(x.q.cap))
}

// offer makes nd the shadow runner-up if it competes and beats the best
// found.
func (x *shadow) offer(nd *node) {
	q := x.q
	ask, credit := nd.asks[q.ti], q.e.credit(q, nd)
	c := cand{nd: nd, ask: ask, credit: credit, score: scoreOf(ask, credit, nd.rel, q.w)}
	if c.score < x.floor || (x.found && rank(&c, &x.best) >= 0) {
		return
	}
	// Last, as it reads the node's record: most nodes are ruled out above.
	if x.competes(nd) {
		x.best, x.found = c, true
	}
}

// competes reports whether nd passes the per-node constraints its offer
// and record decide (avoided provider, trust level, CPU, RAM, ask within the cap,
// enough GPUs for the job), has a window open or to come, and is neither a
// winner nor one of a winner's provider's nodes. The class and its view
// settle the rest.
func (x *shadow) competes(nd *node) bool {
	q := x.q
	if turnsAway(q, nd) || (q.cpu > 0 && !nd.hasCPU(q.cpu)) || (q.ram > 0 && !nd.hasRAM(q.ram)) || nd.asks[q.ti] > q.cap ||
		!nd.enoughGPUs(q) { // it could never run the job, busy or not
		return false
	}
	if nd.until == 0 && nd.nextOpen == 0 {
		return false // closed, and no window opens (a drained node): it will take nothing
	}
	return !slices.ContainsFunc(x.winners, func(w cand) bool {
		return w.nd == nd || w.nd.n.ProviderID == nd.n.ProviderID
	})
}

// enoughGPUs reports whether the node has q.g GPUs that can serve the job,
// busy or not. A node of an accepted class with one GPU type can use them
// all.
func (nd *node) enoughGPUs(q *query) bool {
	if len(nd.gpus) < q.g {
		return false
	}
	return len(nd.cls.types) == 1 || countUsable(q.job, nd.gpus) >= q.g
}

// firstAtLeast returns a position in the order before which no node of
// tier t's view has a weight-1 score of at least x. The view must be
// ordered: its scores never fall along the order. It descends the plan
// tree, whose scores (of busy nodes too) are rounded down: a subtree
// holding a node that surely scores below x rules out every node of the
// view before it.
func (s *shelf) firstAtLeast(t int, x float64) int {
	k, lo, span := 1, 0, s.size
	for k < s.size {
		span /= 2
		l, r := 2*k, 2*k+1
		if s.plan[l].s1[t] == noScore || surelyBelow(s.plan[r].s1[t], x) {
			k, lo = r, lo+span
		} else {
			k = l
		}
	}
	return lo * blockLen
}

// surelyBelow reports whether every score that rounds down to s is below
// x.
func surelyBelow(s score32, x float64) bool {
	if s == noScore {
		return false
	}
	up := math.Nextafter32(math.Float32frombits(uint32(s)), float32(math.Inf(1)))
	return float64(up) < x
}
