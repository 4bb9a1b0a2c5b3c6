package market

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// agg is what a subtree of a view knows about its nodes: the most (or for
// reliability and hold ends the least) of each quantity any one of them
// has. A search skips a subtree whose bounds cannot meet the job, so busy
// nodes, closed windows and reserved GPUs cost nothing. Bounds only: a
// leaf is always checked exactly. Times are whole seconds since aggEpoch,
// rounded the way that keeps each a bound; the struct is kept to 32 bytes,
// since walks and updates are bound by memory.
type agg struct {
	until    uint32  // latest window end (rounded up); 0: closed
	resStart uint32  // latest start of a reservation on a node whose free GPUs it holds back (rounded up); 0: none
	restart  uint32  // latest start or checkpoint of a bronze lease without notice (rounded up): preempting loses at least the time since
	firstEnd uint32  // earliest time a hold should end (rounded down): no reservation can start before
	rel      float32 // lowest reliability, rounded down
	ram      int32
	cpu      int16
	free     int8 // free GPUs on open nodes
	freeLong int8 // ... that a job still running when a reservation starts may use
	preempt  int8 // free GPUs plus GPUs of bronze leases without notice, on open unreserved nodes
	gpus     int8 // all GPUs of open unreserved nodes: what a new reservation could hold
}

// aggEpoch is the zero of agg's times: 2020-01-01 UTC, in unix nanos.
const aggEpoch = int64(1577836800) * int64(time.Second)

// secDown and secUp turn unix nanos into agg seconds, rounding down or up;
// always is the largest.
func secDown(t int64) uint32 {
	switch {
	case t == always:
		return math.MaxUint32
	case t <= aggEpoch:
		return 0
	}
	return uint32(min((t-aggEpoch)/int64(time.Second), math.MaxUint32-1))
}

func secUp(t int64) uint32 {
	switch {
	case t == always:
		return math.MaxUint32
	case t <= aggEpoch:
		return 0
	}
	return uint32(min((t-aggEpoch+int64(time.Second)-1)/int64(time.Second), math.MaxUint32-1))
}

// secNanos turns agg seconds back into unix nanos.
func secNanos(s uint32) int64 {
	if s == math.MaxUint32 {
		return always
	}
	return aggEpoch + int64(s)*int64(time.Second)
}

// emptyAgg fills the leaves past the last node.
var emptyAgg = agg{rel: 1, firstEnd: math.MaxUint32}

// leafAgg is a node's own entry. A closed node (its window not open) can
// take nothing, so it counts no free GPUs: otherwise idle closed nodes,
// which have every GPU free, would make every subtree look promising.
func leafAgg(nd *node) agg {
	a := agg{
		rel:      lowFloat32(nd.rel),
		ram:      int32(min(nd.n.RAMMB, math.MaxInt32)),
		cpu:      int16(min(nd.n.CPUCores, math.MaxInt16)),
		firstEnd: math.MaxUint32,
	}
	if nd.until != 0 {
		a.until = max(1, secUp(nd.until))
	}
	for _, h := range nd.holds {
		a.firstEnd = min(a.firstEnd, secDown(h.freeBy()))
		if h.leaseID != "" && h.tier == idlegrid.TierBronze && !h.noticed {
			a.restart = max(a.restart, secUp(max(h.start, h.checkpoint)))
		}
	}
	if nd.until != 0 {
		a.free = int8(min(nd.free, math.MaxInt8))
		a.freeLong = a.free
		if nd.res == nil {
			a.preempt = int8(min(nd.free+nd.bronze, math.MaxInt8))
			a.gpus = int8(min(len(nd.slots), math.MaxInt8))
		}
		if r := nd.res; r != nil {
			a.freeLong = int8(max(0, min(nd.free, nd.freeAt(r.start)-nd.resGPUs)))
			if a.freeLong < a.free {
				a.resStart = max(1, secUp(r.start))
			}
		}
	}
	return a
}

// lowFloat32 rounds a reliability down to a float32, so that it stays a
// lower bound.
func lowFloat32(x float64) float32 {
	f := float32(x)
	if float64(f) > x {
		f = math.Nextafter32(f, 0)
	}
	return f
}

func combine(a, b agg) agg {
	return agg{
		until: max(a.until, b.until), resStart: max(a.resStart, b.resStart), rel: min(a.rel, b.rel),
		ram: max(a.ram, b.ram), cpu: max(a.cpu, b.cpu),
		free: max(a.free, b.free), freeLong: max(a.freeLong, b.freeLong), preempt: max(a.preempt, b.preempt),
		gpus: max(a.gpus, b.gpus), restart: max(a.restart, b.restart), firstEnd: min(a.firstEnd, b.firstEnd),
	}
}

// cpuOK reports whether the subtree may have cpu cores; the aggregate
// saturates at MaxInt16.
func (a *agg) cpuOK(cpu int) bool { return int(a.cpu) >= min(cpu, math.MaxInt16) }

// gpusOK compares a GPU count with an aggregate, which saturates at MaxInt8.
func gpusOK(have int8, need int) bool { return int(have) >= min(need, math.MaxInt8) }

// mayPlace reports whether a subtree may hold a node that can take q now:
// one that is open long enough, big enough, and has q.g free GPUs that no
// reservation holds back from q (a job that ends before a reservation
// starts may use all the free GPUs).
func (a *agg) mayPlace(q *query) bool {
	return a.until >= q.needUntilSec && a.cpu >= q.cpu16 && a.ram >= q.ram32 &&
		(a.freeLong >= q.g8 || (a.free >= q.g8 && a.resStart >= q.endSec))
}

// view is a shelf's nodes in the order of their score at weight 1 for
// one tier (ask ÷ reliability, then node ID), over a complete binary tree
// of aggregates: leaf i is order[i], node k covers its children 2k and 2k+1.
//
// Changes of membership or order mark the view dirty and are applied in
// one sort and rebuild at the next search; changes of a node's free GPUs
// or window update one path of the tree.
type view struct {
	// The class loop of a search reads only these first fields.
	dirty  bool
	gen    uint64  // bumps on every rebuild, to invalidate lbs
	relMin float64 // lowest reliability in the view, clamped
	root   agg     // agg[1], kept here where the class loop reads it
	lbs    [idlegrid.MaxGPUsPerNode + 1]lbEntry

	shelf *shelf
	tier  int
	order []*node
	s1    []float64 // order's weight-1 scores, kept apart so a walk reads no node it skips
	size  int       // leaves: a power of two at least len(order)
	agg   []agg     // 2*size; agg[1] is the root

	dirtyList *[]*view // the engine's list of views to clean at the next Advance
}

// lbEntry caches view.lb for one GPU count: the position of the first
// leaf with that many free GPUs (-1: none), valid while gen is the view's.
type lbEntry struct {
	gen uint64
	pos int
	val float64 // s1[pos], or +Inf
}

func (v *view) markDirty() {
	if !v.dirty {
		v.dirty = true
		*v.dirtyList = append(*v.dirtyList, v)
	}
}

func (v *view) add(nd *node) {
	v.order = append(v.order, nd)
	v.markDirty()
}

func (v *view) remove(nd *node) {
	i := -1
	if p := nd.posIn(v); p != nil {
		i = *p
	}
	if i < 0 || i >= len(v.order) || v.order[i] != nd {
		i = slices.Index(v.order, nd)
	}
	if i >= 0 {
		v.order = slices.Delete(v.order, i, i+1)
	}
	v.markDirty()
}

// clean applies pending changes: sorts the nodes and rebuilds the tree.
func (v *view) clean() {
	if !v.dirty {
		return
	}
	t := v.tier
	slices.SortFunc(v.order, func(a, b *node) int {
		return cmp.Or(cmp.Compare(a.s1[t], b.s1[t]), strings.Compare(a.id, b.id))
	})
	size := 1
	for size < len(v.order) {
		size *= 2
	}
	if cap(v.agg) >= 2*size {
		v.agg = v.agg[:2*size]
	} else {
		v.agg = make([]agg, 2*size)
	}
	for i := size + len(v.order); i < 2*size; i++ {
		v.agg[i] = emptyAgg
	}
	v.size, v.relMin = size, 1
	v.s1 = v.s1[:0]
	for i, nd := range v.order {
		*nd.posIn(v) = i
		v.s1 = append(v.s1, nd.s1[t])
		v.agg[size+i] = leafAgg(nd)
		v.relMin = min(v.relMin, nd.rel)
	}
	for k := size - 1; k >= 1; k-- {
		v.agg[k] = combine(v.agg[2*k], v.agg[2*k+1])
	}
	v.root = v.agg[1]
	v.dirty = false
	v.gen++
}

// update refreshes one node's leaf, a = leafAgg(nd), and the path above.
func (v *view) update(nd *node, pos int, a agg) {
	if v.dirty || pos < 0 {
		return // the rebuild will read it, or it is not in this view
	}
	k := v.size + pos
	if v.agg[k] == a {
		return
	}
	if v.agg[k].free != a.free {
		v.adjustLB(pos, int(a.free))
	}
	v.agg[k] = a
	for k /= 2; k >= 1; k /= 2 {
		c := combine(v.agg[2*k], v.agg[2*k+1])
		if v.agg[k] == c {
			break // nothing above changes either
		}
		v.agg[k] = c
	}
	v.root = v.agg[1]
}

// lb is the weight-1 score of the first node in order with at least g free
// GPUs: no node the job can use now scores lower. +Inf when there is none.
func (v *view) lb(g int) float64 {
	v.clean()
	if g > idlegrid.MaxGPUsPerNode {
		return v.s1At(v.findLB(g))
	}
	l := &v.lbs[g]
	if l.gen != v.gen {
		l.pos, l.gen = v.findLB(g), v.gen
		l.val = v.s1At(l.pos)
	}
	return l.val
}

// s1At is the weight-1 score at pos, +Inf for -1.
func (v *view) s1At(pos int) float64 {
	if pos < 0 {
		return math.Inf(1)
	}
	return v.s1[pos]
}

// adjustLB keeps the cached lbs right when the leaf at pos comes to have
// free GPUs, instead of recomputing them.
func (v *view) adjustLB(pos, free int) {
	for g := 1; g <= idlegrid.MaxGPUsPerNode; g++ {
		l := &v.lbs[g]
		switch {
		case l.gen != v.gen:
		case free >= g && (l.pos < 0 || pos < l.pos):
			l.pos, l.val = pos, v.s1[pos]
		case free < g && pos == l.pos:
			l.gen = 0 // the first fit left: look again
		}
	}
}

// findLB returns the position of the first leaf with g free GPUs, or -1.
func (v *view) findLB(g int) int {
	if !gpusOK(v.agg[1].free, g) {
		return -1
	}
	k := 1
	for k < v.size {
		if gpusOK(v.agg[2*k].free, g) {
			k = 2 * k
		} else {
			k = 2*k + 1
		}
	}
	return k - v.size
}

// fits reports whether a subtree's maxima can meet a search.
func (a *agg) fits(s *search) bool {
	return a.until >= secDown(s.minUntil) && a.cpuOK(s.cpu) && int(a.ram) >= s.ram &&
		gpusOK(a.free, s.minFree) && gpusOK(a.preempt, s.minPreempt) && gpusOK(a.gpus, s.minGPUs)
}

// search is a full walk over views, for gang plans: the subtree bounds,
// and what to do at a leaf (visit returns false to end the walk).
type search struct {
	minUntil            int64
	cpu, ram            int
	minFree, minPreempt int
	minGPUs             int
	visit               func(nd *node) bool
}

// walk visits, in score order, every node whose subtree fits s, until s
// says to stop. It reports whether to go on.
func (v *view) walk(s *search) bool {
	v.clean()
	if len(v.order) == 0 {
		return true
	}
	return v.walkAt(1, 0, v.size, s)
}

func (v *view) walkAt(k, lo, hi int, s *search) bool {
	if lo >= len(v.order) || !v.agg[k].fits(s) {
		return true
	}
	if hi-lo == 1 {
		return s.visit(v.order[lo])
	}
	mid := (lo + hi) / 2
	return v.walkAt(2*k, lo, mid, s) && v.walkAt(2*k+1, mid, hi, s)
}

// bestFirst visits nodes of views in the order of a lower bound on what a
// plan there would cost: it expands the subtree with the lowest bound
// first, skips subtrees that skip rejects, and ends when stop says the
// next bound cannot beat the best plan found.
//
// skip is given the subtree's aggregate and the least weight-1 score in
// it, and bound the aggregate.
func bestFirst(views []*view, skip func(a *agg, s1 float64) bool, bound func(*agg) int64, visit func(*node), stop func(bound int64) bool) {
	var h []bfItem
	for _, v := range views {
		v.clean()
		if len(v.order) > 0 && !skip(&v.agg[1], v.s1[0]) {
			h = pushItem(h, bfItem{bound(&v.agg[1]), v, 1, 0, v.size})
		}
	}
	for len(h) > 0 {
		var it bfItem
		it, h = popItem(h)
		if stop(it.bound) {
			return
		}
		v := it.v
		if it.hi-it.lo == 1 {
			visit(v.order[it.lo])
			continue
		}
		mid := (it.lo + it.hi) / 2
		for _, c := range [2]bfItem{{0, v, 2 * it.k, it.lo, mid}, {0, v, 2*it.k + 1, mid, it.hi}} {
			if c.lo < len(v.order) && !skip(&v.agg[c.k], v.s1[c.lo]) {
				c.bound = bound(&v.agg[c.k])
				h = pushItem(h, c)
			}
		}
	}
}

// bfItem is a subtree waiting in bestFirst.
type bfItem struct {
	bound     int64
	v         *view
	k, lo, hi int
}

func pushItem(h []bfItem, it bfItem) []bfItem {
	h = append(h, it)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p].bound <= h[i].bound {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	return h
}

func popItem(h []bfItem) (bfItem, []bfItem) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].bound < h[m].bound {
			m = l
		}
		if r < len(h) && h[r].bound < h[m].bound {
			m = r
		}
		if m == i {
			break
		}
		h[m], h[i] = h[i], h[m]
		i = m
	}
	return top, h
}
