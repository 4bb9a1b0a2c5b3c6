package market

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Verify checks the engine's own bookkeeping: holds and free counts, the
// class views' order and aggregates, claims, orphans and reservations. The
// random-run test calls it after every step.
func (e *Engine) Verify() error {
	for id, nd := range e.nodes {
		if err := e.verifyNode(id, nd); err != nil {
			return fmt.Errorf("node %s: %w", id, err)
		}
	}
	for id, h := range e.leases {
		if err := e.verifyGang(h); err != nil {
			return fmt.Errorf("lease %s: %w", id, err)
		}
		if h.nd == nil {
			if e.orphans[h.nodeID][id] != h {
				return fmt.Errorf("lease %s: detached but not an orphan", id)
			}
		} else if e.nodes[h.nodeID] != h.nd {
			return fmt.Errorf("lease %s: on a node the engine does not know", id)
		}
	}
	for k, h := range e.claims {
		if h.nd == nil || e.nodes[k.nodeID] != h.nd || h.gpus == 0 {
			return fmt.Errorf("claim %v: dangling", k)
		}
	}
	for job, r := range e.reservations {
		for _, nd := range r.nodes {
			if nd.res != r || e.nodes[nd.id] != nd {
				return fmt.Errorf("reservation of %s: node %s does not hold it", job, nd.id)
			}
		}
	}
	total := 0
	for i, c := range e.classes {
		if c.idx != i || e.classByKey[c.key] != c || c.count == 0 {
			return fmt.Errorf("class %d: bad index", i)
		}
		total += c.count
		shelves := []*shelf{&c.shelf}
		for ds, sub := range c.cached {
			if !slices.Contains(e.cachedBy[ds], c) || sub.count == 0 {
				return fmt.Errorf("class %d: sub-shelf %s not indexed", i, ds)
			}
			shelves = append(shelves, sub)
		}
		for _, s := range shelves {
			if err := s.verify(e, c); err != nil {
				return fmt.Errorf("class %d: %w", i, err)
			}
		}
	}
	if total != len(e.nodes) {
		return fmt.Errorf("classes hold %d nodes, engine %d", total, len(e.nodes))
	}
	return nil
}

func (e *Engine) verifyNode(id string, nd *node) error {
	if nd.cls == nil || e.classes[nd.cls.idx] != nd.cls {
		return fmt.Errorf("not in a class")
	}
	if nd.res != nil && e.reservations[nd.res.jobID] != nd.res {
		return fmt.Errorf("holds a dropped reservation of %s", nd.res.jobID)
	}
	counts := map[*hold]int{}
	free := 0
	for _, h := range nd.held {
		if h == nil {
			free++
		} else {
			counts[h]++
		}
	}
	if len(nd.held) != len(nd.gpus) {
		return fmt.Errorf("%d slots, %d GPUs", len(nd.held), len(nd.gpus))
	}
	if free != int(nd.free) {
		return fmt.Errorf("free %d, counted %d", nd.free, free)
	}
	if len(counts) != len(nd.holds) {
		return fmt.Errorf("%d holds on slots, %d listed", len(counts), len(nd.holds))
	}
	if nd.views != viewsOf(nd, e.cfg) || nd.cached != (len(nd.datasets) > 0) ||
		nd.reserved != (nd.res != nil) || nd.mixed != nd.cls.mixed() {
		return fmt.Errorf("stale views or flags")
	}
	b, bp := nd.base, nd.basePlan
	if nd.setBase(); nd.base != b || nd.basePlan != bp {
		return fmt.Errorf("stale base entries")
	}
	if nd.cell != nil && e.market[cellKey{nd.cellModel, nd.n.Region}] != nd.cell {
		return fmt.Errorf("stale market cell")
	}
	if len(nd.sums) != len(nd.holds) {
		return fmt.Errorf("%d hold summaries for %d holds", len(nd.sums), len(nd.holds))
	}
	for i, h := range nd.holds {
		if nd.sums[i] != sumOf(h) {
			return fmt.Errorf("stale summary of hold %s/%s", h.leaseID, h.jobID)
		}
	}
	for _, h := range nd.holds {
		if counts[h] != h.gpus || h.nd != nd {
			return fmt.Errorf("hold %s/%s: %d GPUs, counted %d", h.leaseID, h.jobID, h.gpus, counts[h])
		}
		if h.leaseID != "" && e.leases[h.leaseID] != h {
			return fmt.Errorf("hold of unknown lease %s", h.leaseID)
		}
		if h.leaseID == "" && e.claims[claimKey{h.jobID, id}] != h {
			return fmt.Errorf("hold of unknown claim of %s", h.jobID)
		}
	}
	return nil
}

// verifyGang checks that h's gang lists it, and only live holds of its
// job.
func (e *Engine) verifyGang(h *hold) error {
	g := h.gang
	if g == nil {
		return nil
	}
	if !slices.Contains(g.holds, h) {
		return fmt.Errorf("gang does not list it")
	}
	for _, s := range g.holds {
		live := (s.leaseID != "" && e.leases[s.leaseID] == s) || (s.leaseID == "" && e.claims[claimKey{s.jobID, s.nodeID}] == s)
		if s.gang != g || s.jobID != h.jobID || !live {
			return fmt.Errorf("gang lists a hold of %s/%s that is not its own live one", s.leaseID, s.jobID)
		}
	}
	return nil
}

// verify checks a shelf of class c: its members, order, tree and cached
// bounds.
func (s *shelf) verify(e *Engine, c *class) error {
	var inView [tierCount]int
	count := 0
	for _, nd := range e.nodes {
		if !slices.Contains(nd.shelves, s) {
			continue
		}
		count++
		for t := range tierCount {
			if nd.inView(t) {
				inView[t]++
			}
		}
	}
	if count != s.count || count != len(s.order) || inView != s.inView {
		return fmt.Errorf("shelf counts %d/%d/%v, nodes on it %d/%v", s.count, len(s.order), s.inView, count, inView)
	}
	if s.dirty {
		return nil
	}
	for i, nd := range s.order {
		if p := nd.posIn(s); p == nil || int(*p) != i {
			return fmt.Errorf("node %s misplaced", nd.id)
		}
		if nd.cls != c {
			return fmt.Errorf("node %s: wrong class", nd.id)
		}
		if i > 0 {
			p := s.order[i-1]
			if cmp.Or(cmp.Compare(p.key, nd.key), strings.Compare(p.id, nd.id)) >= 0 {
				return fmt.Errorf("out of order at %d", i)
			}
		}
		if s.leaves[i] != leafAgg(nd) || nd.leaf != leafAgg(nd) {
			return fmt.Errorf("stale leaf for %s", nd.id)
		}
		// The plan entry is as of planAt; but for its cover bands, which
		// stay bounds as time goes on, it is as of now.
		p, _ := e.planOf(nd, nd.planAt)
		fresh, _ := e.planOf(nd, e.eligibleAt)
		copy(fresh.restart[1:], p.restart[1:])
		fresh.laterEnd = p.laterEnd
		if s.leafPlans[i] != p || nd.leafPlan != p || nd.planAt > e.eligibleAt || p != fresh {
			return fmt.Errorf("stale plan leaf for %s", nd.id)
		}
	}
	blocks := (len(s.order) + blockLen - 1) / blockLen
	if len(s.leaves) != blocks*blockLen || len(s.leafPlans) != len(s.leaves) || s.size < blocks || len(s.agg) != 2*s.size {
		return fmt.Errorf("%d leaves in %d blocks, tree of %d", len(s.leaves), blocks, s.size)
	}
	for i := len(s.order); i < len(s.leaves); i++ {
		if s.leaves[i] != emptyAgg || s.leafPlans[i] != emptyPlan {
			return fmt.Errorf("padding leaf %d not empty", i)
		}
	}
	for j := range s.size {
		a, p := emptyAgg, emptyPlan
		if j < blocks {
			a, p = s.sumBlock(j), s.sumBlockPlan(j)
		}
		if s.agg[s.size+j] != a || s.plan[s.size+j] != p {
			return fmt.Errorf("stale sum of block %d", j)
		}
	}
	for k := s.size - 1; k >= 1; k-- {
		if s.agg[k] != combine(s.agg[2*k], s.agg[2*k+1]) {
			return fmt.Errorf("stale aggregate %d", k)
		}
		if s.plan[k] != combinePlan(s.plan[2*k], s.plan[2*k+1]) {
			return fmt.Errorf("stale plan aggregate %d", k)
		}
	}
	if s.root != s.agg[1] {
		return fmt.Errorf("stale root copy")
	}
	for t := range tierCount {
		for g := 1; g <= lbMax; g++ {
			l := s.lbs[t][g]
			if l.gen != s.gen {
				continue
			}
			if err := s.verifyFits(t, g, &l); err != nil {
				return fmt.Errorf("cached fits for tier %d, %d GPUs: %w", t, g, err)
			}
		}
		last := 0.0
		for i, nd := range s.order {
			if !s.ordered[t] || !nd.inView(t) {
				continue
			}
			if nd.s1[t] < last {
				return fmt.Errorf("tier %d marked ordered, but not at %d", t, i)
			}
			last = nd.s1[t]
		}
	}
	return nil
}

// verifyFits checks one cached lbEntry against the shelf's nodes.
func (s *shelf) verifyFits(t, g int, l *lbEntry) error {
	var fits []int32
	for i, nd := range s.order {
		if nd.inView(t) && nd.until != 0 && int(nd.free) >= g {
			fits = append(fits, int32(i))
		}
	}
	slices.SortStableFunc(fits, func(a, b int32) int { return cmp.Compare(s.order[a].s1[t], s.order[b].s1[t]) })
	n := int(l.n)
	if n > len(fits) || !slices.Equal(l.pos[:n], fits[:n]) {
		return fmt.Errorf("lists %v, the best fits are %v", l.pos[:n], fits[:min(n, len(fits))])
	}
	for i := range n {
		if l.val[i] != s.order[l.pos[i]].s1[t] {
			return fmt.Errorf("stale score at %d", l.pos[i])
		}
		if l.rel[i] != s.order[l.pos[i]].rel {
			return fmt.Errorf("stale reliability at %d", l.pos[i])
		}
		if l.nds[i] != s.order[l.pos[i]] {
			return fmt.Errorf("stale node at %d", l.pos[i])
		}
	}
	rest := fits[n:]
	if l.done && len(rest) > 0 {
		return fmt.Errorf("done, but %v fit too", rest)
	}
	if s.ordered[t] && !l.done && len(rest) > 0 && slices.Min(rest) < l.from {
		return fmt.Errorf("a fit before from %d", l.from)
	}
	return nil
}

func (e *Engine) DebugRes(nodeID string) string {
	nd := e.nodes[nodeID]
	if nd == nil || nd.res == nil {
		return "none"
	}
	return fmt.Sprintf("%s start=%v gpus=%d freeAt=%d free=%d", nd.res.jobID, timeOf(nd.res.start), nd.resGPUs, nd.freeAt(nd.res.start), nd.free)
}
