package market

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// order lists the class's nodes, whatever tiers they sell.
func (c *class) order() []*node {
	var out []*node
	seen := map[*node]bool{}
	for _, v := range c.views {
		for _, nd := range v.order {
			if !seen[nd] {
				seen[nd] = true
				out = append(out, nd)
			}
		}
	}
	return out
}

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
			for _, v := range s.views {
				if v == nil {
					continue
				}
				if err := v.verify(c, e.cfg.GoldMinReliability); err != nil {
					return fmt.Errorf("class %d view %d: %w", i, v.tier, err)
				}
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
	for _, s := range nd.slots {
		if s.hold == nil {
			free++
		} else {
			counts[s.hold]++
		}
	}
	if free != nd.free {
		return fmt.Errorf("free %d, counted %d", nd.free, free)
	}
	if len(counts) != len(nd.holds) {
		return fmt.Errorf("%d holds on slots, %d listed", len(counts), len(nd.holds))
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

func (v *view) verify(c *class, goldBar float64) error {
	if v.dirty {
		return nil
	}
	want := 0
	for _, nd := range c.order() {
		if slices.Contains(nd.shelves, v.shelf) && nd.sells(v.tier, goldBar) {
			want++
		}
	}
	if len(v.order) != want {
		return fmt.Errorf("%d nodes, %d of the shelf's sell the tier", len(v.order), want)
	}
	if v.dirty {
		return nil
	}
	for i, nd := range v.order {
		if p := nd.posIn(v); p == nil || *p != i {
			return fmt.Errorf("node %s misplaced", nd.id)
		}
		if nd.cls != c || v.s1[i] != nd.s1[v.tier] {
			return fmt.Errorf("node %s: wrong class or stale score", nd.id)
		}
		if i > 0 {
			p := v.order[i-1]
			if cmp.Or(cmp.Compare(p.s1[v.tier], nd.s1[v.tier]), strings.Compare(p.id, nd.id)) >= 0 {
				return fmt.Errorf("out of order at %d", i)
			}
		}
		if v.agg[v.size+i] != leafAgg(nd) {
			return fmt.Errorf("stale leaf for %s", nd.id)
		}
	}
	for k := v.size - 1; k >= 1; k-- {
		if v.agg[k] != combine(v.agg[2*k], v.agg[2*k+1]) {
			return fmt.Errorf("stale aggregate %d", k)
		}
	}
	if v.root != v.agg[1] {
		return fmt.Errorf("stale root copy")
	}
	for g := 1; g < len(v.lbs); g++ {
		if l := v.lbs[g]; l.gen == v.gen && l.pos != v.findLB(g) {
			return fmt.Errorf("cached lb for %d GPUs at %d, first fit at %d", g, l.pos, v.findLB(g))
		}
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
