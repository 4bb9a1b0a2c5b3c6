package market

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// lbMax is the largest GPU count whose fits a shelf caches; a job asks for
// at most MaxGPUsPerNode per node.
const lbMax = idlegrid.MaxGPUsPerNode

// blockShift sets a shelf's block: blockLen consecutive leaves, kept
// together and summed up in one leaf of the tree above them.
const (
	blockShift = 3
	blockLen   = 1 << blockShift // sumBlock adds up eight
)

// shelf is a set of nodes (a class, or the nodes of a class that cache one
// dataset) in one order, indexed for searches. The order is by weight-1
// score at the node's key tier (silver when it sells it), then node ID.
//
// Each node has an entry (agg and planAgg) in leaves and leafPlans, at its
// position in order. The leaves come in blocks of blockLen, and a complete
// binary tree of aggregates sums the blocks up: tree leaf size+j combines
// block j, node k covers its children 2k and 2k+1. Blocks keep the cold
// part of every path in a few adjacent cache lines, and the tree, an
// eighth of the nodes, stays in cache. The aggregates keep each tier's
// least score, so a search for any tier can skip subtrees that cannot
// beat what it holds.
//
// Changes of membership or order mark the shelf dirty and are applied in
// one sort and rebuild at the next Advance or search; changes of a node's
// free GPUs, window, holds or reservation rewrite its entry, its block's
// sum and the path above, stopping where nothing changes.
type shelf struct {
	// A search's class loop reads only these first fields, which fill one
	// cache line, and the lbs entry for its job: bounding a shelf reads two
	// lines (TestShelfLayout).
	root   agg
	gen    uint64             // bumps on every rebuild, to invalidate lbs
	relMin [tierCount]float32 // lowest reliability in each tier's view, clamped, rounded down
	dirty  bool
	// ordered says, per tier, that the weight-1 scores of the tier's view
	// never fall along the shelf's order (always so for silver, the key
	// tier), so that a search may start at its cached first fit.
	ordered [tierCount]bool
	_       [8]byte // lbs starts a cache line, so no entry's head straddles two
	lbs     [tierCount][lbMax + 1]lbEntry

	// leastAsk is, per tier, the least ask of a node in the tier's view,
	// busy or not (0: none): wait reasons read it. A move into a view
	// lowers it; one out of a view marks it stale (a bit per tier), and
	// the next read finds it again.
	leastAsk [tierCount]idlegrid.Micros
	askStale uint8

	scratchLB lbEntry // fits for more GPUs than lbs keeps
	pows      [tierCount]powMemo
	ranks     [rankedMax]rankedList // views ranked by score, for shadow searches (ranked.go)

	// members bumps when a node joins or leaves the shelf; moves logs the
	// restands since the gen movesSince (ranked.go).
	members    uint64
	moves      []moveRec
	movesSince uint64
	count      int            // nodes on the shelf
	inView     [tierCount]int // of them, nodes in each tier's view
	// bySize counts the nodes of each tier's view by their GPUs (at most
	// lbMax), for wait reasons: those with too few for a job.
	bySize    [tierCount][lbMax + 1]int32
	order     []*node
	leaves    []agg     // by position, padded to whole blocks
	leafPlans []planAgg // beside leaves
	size      int       // the tree's leaves: a power of two at least the blocks
	agg       []agg     // 2*size; agg[1] is the root
	plan      []planAgg // 2*size, beside agg

	e *Engine // whose list of shelves to clean at the next Advance it joins when dirty
}

// fitsKept is how many fits a shelf keeps per tier and GPU count: enough
// for a gang of four and its price.
const fitsKept = 5

// lbEntry caches, for one tier and GPU count, the shelf's best fits: the
// nodes of the tier's view that are open with that many GPUs free. It
// lists the n fits with the least weight-1 scores (ties by position), in
// that order, with their scores, so that every other fit scores at least
// the last: done says there are no others. The first is the shelf's
// lower bound. Fits that come and go are added and removed in place, and
// a search extends the list when it needs more. It is valid while gen is
// the shelf's. nds holds the listed nodes themselves, so that judging
// them does not read the shelf's order, and rel their reliabilities, so
// that a job weighting reliability, or earning credit, can rule a fit out
// without reading its node (a change of reliability rebuilds the shelf).
//
// In an ordered tier the list is the first fits in order, and from is
// where to look for the next one: no fit lies between the last listed
// and from.
type lbEntry struct {
	// A search's bound reads gen, n, done and val[0]: they come first, to
	// share a cache line.
	gen  uint64
	n    int8
	done bool
	from int32
	val  [fitsKept]float64
	rel  [fitsKept]float64
	nds  [fitsKept]*node
	pos  [fitsKept]int32
}

func (e *Engine) newShelf() *shelf {
	return &shelf{size: 1, agg: []agg{emptyAgg, emptyAgg}, plan: []planAgg{emptyPlan, emptyPlan},
		root: emptyAgg, gen: 1, relMin: [tierCount]float32{1, 1, 1}, e: e}
}

func (s *shelf) markDirty() {
	if !s.dirty {
		s.dirty = true
		s.e.dirty = append(s.e.dirty, s)
	}
}

// add puts nd on the shelf.
func (s *shelf) add(nd *node) {
	nd.shelves = append(nd.shelves, s)
	nd.pos = append(nd.pos, -1)
	s.count++
	s.countView(nd, nd.views, 1)
	s.order = append(s.order, nd)
	s.joined()
	s.markDirty()
}

// remove takes nd off the shelf.
func (s *shelf) remove(nd *node) {
	i := slices.Index(nd.shelves, s)
	if i < 0 {
		return
	}
	s.count--
	s.countView(nd, nd.views, -1)
	p := int(nd.pos[i])
	if p < 0 || p >= len(s.order) || s.order[p] != nd {
		p = slices.Index(s.order, nd)
	}
	if p >= 0 {
		s.order = slices.Delete(s.order, p, p+1)
	}
	nd.shelves = slices.Delete(nd.shelves, i, i+1)
	nd.pos = slices.Delete(nd.pos, i, i+1)
	s.joined()
	s.markDirty()
}

// posIn returns where the node's index in s is kept.
func (nd *node) posIn(s *shelf) *int32 {
	for i, x := range nd.shelves {
		if x == s {
			return &nd.pos[i]
		}
	}
	return nil
}

// clean applies pending changes: sorts the nodes and rebuilds the index.
func (s *shelf) clean() {
	if !s.dirty {
		return
	}
	slices.SortFunc(s.order, compareOrder)
	n := len(s.order)
	blocks := (n + blockLen - 1) / blockLen
	size := 1
	for size < blocks {
		size *= 2
	}
	s.leaves = grow(s.leaves, blocks*blockLen)
	s.leafPlans = grow(s.leafPlans, blocks*blockLen)
	s.agg = grow(s.agg, 2*size)
	s.plan = grow(s.plan, 2*size)
	s.size, s.relMin, s.ordered = size, [tierCount]float32{1, 1, 1}, [tierCount]bool{true, true, true}
	s.leastAsk, s.askStale = [tierCount]idlegrid.Micros{}, 0
	var last [tierCount]float64
	for i, nd := range s.order {
		*nd.posIn(s) = int32(i)
		nd.leaf, nd.leafPlan = s.e.entries(nd)
		s.leaves[i], s.leafPlans[i] = nd.leaf, nd.leafPlan
		for t := range tierCount {
			if nd.inView(t) {
				s.relMin[t] = min(s.relMin[t], lowFloat32(nd.rel))
				s.lowerAsk(t, nd.asks[t])
				s.ordered[t] = s.ordered[t] && nd.s1[t] >= last[t]
				last[t] = nd.s1[t]
			}
		}
	}
	for i := n; i < len(s.leaves); i++ {
		s.leaves[i], s.leafPlans[i] = emptyAgg, emptyPlan
	}
	for j := range size {
		if j < blocks {
			s.agg[size+j], s.plan[size+j] = s.sumBlock(j), s.sumBlockPlan(j)
		} else {
			s.agg[size+j], s.plan[size+j] = emptyAgg, emptyPlan
		}
	}
	for k := size - 1; k >= 1; k-- {
		s.agg[k] = combine(s.agg[2*k], s.agg[2*k+1])
		s.plan[k] = combinePlan(s.plan[2*k], s.plan[2*k+1])
	}
	s.root = s.agg[1]
	s.dirty = false
	s.gen++
	s.moves, s.movesSince = s.moves[:0], s.gen
}

// compareOrder is a shelf's order: key, then node ID.
func compareOrder(a, b *node) int {
	return cmp.Or(cmp.Compare(a.key, b.key), strings.Compare(a.id, b.id))
}

// lowerAsk takes ask, of a node in tier t's view, into the tier's least.
func (s *shelf) lowerAsk(t int, ask idlegrid.Micros) { s.leastAsk[t] = leastOf(s.leastAsk[t], ask) }

// leastAskOf returns the least ask in tier t's view (0: none).
func (s *shelf) leastAskOf(t int) idlegrid.Micros {
	s.clean()
	if s.askStale&(1<<t) != 0 {
		s.leastAsk[t] = 0
		for _, nd := range s.order {
			if nd.inView(t) {
				s.lowerAsk(t, nd.asks[t])
			}
		}
		s.askStale &^= 1 << t
	}
	return s.leastAsk[t]
}

// leastOf returns the lesser of two asks, where 0 is none.
func leastOf(a, b idlegrid.Micros) idlegrid.Micros {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// countView counts nd into (delta 1) or out of (-1) the views whose bits
// views sets.
func (s *shelf) countView(nd *node, views uint8, delta int) {
	g := min(len(nd.gpus), lbMax)
	for t := range tierCount {
		if views&(1<<t) != 0 {
			s.inView[t] += delta
			s.bySize[t][g] += int32(delta)
		}
	}
}

// fewer returns how many nodes of tier t's view have fewer than g GPUs.
func (s *shelf) fewer(t, g int) int {
	n := 0
	for _, c := range s.bySize[t][:min(g, lbMax+1)] {
		n += int(c)
	}
	return n
}

// joined notes that a node joined or left the shelf.
func (s *shelf) joined() { s.members++ }

// powMemo remembers, for one tier and reliability weight w, the factor
// searches scale the tier's least reliability by: lowFactor(w, relMin).
type powMemo struct {
	gen    uint64
	w, low float64
}

// powers returns the memo for tier t and weight w.
func (s *shelf) powers(t int, w float64) *powMemo {
	m := &s.pows[t]
	if m.gen != s.gen || m.w != w {
		relMin := float64(s.relMin[t])
		*m = powMemo{gen: s.gen, w: w, low: lowFactor(w, relMin)}
	}
	return m
}

// grow returns xs resized to n, reusing its memory when it can.
func grow[T any](xs []T, n int) []T {
	if cap(xs) >= n {
		return xs[:n]
	}
	return make([]T, n)
}

// sumBlock and sumBlockPlan combine the entries of block j.
func (s *shelf) sumBlock(j int) agg {
	ls := s.leaves[j*blockLen : (j+1)*blockLen]
	a := combine(combine(combine(ls[0], ls[1]), combine(ls[2], ls[3])), combine(combine(ls[4], ls[5]), combine(ls[6], ls[7])))
	return a
}

func (s *shelf) sumBlockPlan(j int) planAgg {
	ps := s.leafPlans[j*blockLen : (j+1)*blockLen]
	return combinePlan(combinePlan(combinePlan(ps[0], ps[1]), combinePlan(ps[2], ps[3])),
		combinePlan(combinePlan(ps[4], ps[5]), combinePlan(ps[6], ps[7])))
}

// update rewrites the entries of the node at pos from old to a and from
// oldPlan to p, its block's sums and the paths above, stopping where
// nothing changes. The old entries are the node's own copies (nd.leaf and
// nd.leafPlan, which a clean shelf's entries equal), so that an update
// that only grows a block writes the shelf's leaf without first waiting
// to read it.
func (s *shelf) update(nd *node, pos int, old, a agg, oldPlan, p planAgg) {
	if s.dirty || pos < 0 {
		return // the rebuild will read it, or it is not on this shelf
	}
	if old != a {
		if old.free != a.free {
			s.adjustLB(nd, int32(pos), int(old.free), int(a.free))
		}
		s.leaves[pos] = a
		s.updateAgg(pos, old, a)
	}
	s.updatePlan(pos, oldPlan, p)
}

// updateAgg rewrites the sum of the block of pos, whose entry went from
// old to a, and the path above.
func (s *shelf) updateAgg(pos int, old, a agg) {
	k := s.size + pos>>blockShift
	b := s.agg[k]
	if combine(old, a) == a {
		b = combine(b, a) // it only grew: so does the block
	} else {
		b = s.sumBlock(pos >> blockShift)
	}
	if s.agg[k] == b {
		return
	}
	s.agg[k] = b
	for j := k / 2; j >= 1; j /= 2 {
		c := combine(s.agg[2*j], s.agg[2*j+1])
		if s.agg[j] == c {
			break // nothing above changes either
		}
		s.agg[j] = c
	}
	s.root = s.agg[1]
}

// updatePlan rewrites the plan entry of the node at pos from old to p,
// its block's sum and the path above.
func (s *shelf) updatePlan(pos int, old, p planAgg) {
	if s.dirty || pos < 0 || old == p {
		return
	}
	s.leafPlans[pos] = p
	k := s.size + pos>>blockShift
	b := s.plan[k]
	if combinePlan(old, p) == p {
		b = combinePlan(b, p)
	} else {
		b = s.sumBlockPlan(pos >> blockShift)
	}
	if s.plan[k] == b {
		return
	}
	s.plan[k] = b
	for j := k / 2; j >= 1; j /= 2 {
		c := combinePlan(s.plan[2*j], s.plan[2*j+1])
		if s.plan[j] == c {
			break
		}
		s.plan[j] = c
	}
}

// fits returns the cached fits for tier t and g GPUs, with at least
// want of them listed in an ordered tier unless there are fewer: the
// first is the least weight-1 score of a node in the tier's view with g
// GPUs free (no node the job can use now scores lower), none when the
// list is empty and done.
func (s *shelf) fits(t, g, want int) *lbEntry {
	s.clean()
	l := &s.scratchLB
	if g <= lbMax {
		l = &s.lbs[t][g]
	} else {
		l.gen = 0
	}
	if l.gen != s.gen {
		*l = lbEntry{gen: s.gen}
	}
	for int(l.n) < want && !l.done {
		var pos int
		if s.ordered[t] {
			pos = s.nextFit(t, g, int(l.from))
			l.from = int32(pos + 1)
		} else {
			after, afterPos := math.Inf(-1), int32(-1)
			if l.n > 0 {
				after, afterPos = l.val[l.n-1], l.pos[l.n-1]
			}
			pos = s.nextBest(t, g, after, afterPos)
		}
		if pos < 0 {
			l.done = true
			break
		}
		nd := s.order[pos]
		l.pos[l.n], l.val[l.n], l.rel[l.n], l.nds[l.n] = int32(pos), nd.s1[t], nd.rel, nd
		l.n++
	}
	return l
}

// adjustLB keeps the cached fits right when a node's free GPUs change
// from oldFree to newFree, instead of searching again.
func (s *shelf) adjustLB(nd *node, pos int32, oldFree, newFree int) {
	// Only the counts between the two change: it became, or stopped
	// being, a fit for them.
	lo, hi := min(oldFree, newFree)+1, min(lbMax, max(oldFree, newFree))
	gained := newFree > oldFree
	for t := range tierCount {
		if !nd.inView(t) {
			continue
		}
		v := nd.s1[t]
		for g := lo; g <= hi; g++ {
			l := &s.lbs[t][g]
			switch {
			case l.gen != s.gen:
			case gained:
				l.gain(nd, pos, v, s.ordered[t])
			default:
				l.lose(pos)
			}
		}
	}
}

// gain records that nd, at pos and scoring v, became a fit.
func (l *lbEntry) gain(nd *node, pos int32, v float64, ordered bool) {
	i := int8(0)
	for i < l.n && (l.val[i] < v || (l.val[i] == v && l.pos[i] < pos)) {
		i++
	}
	if i == l.n && !l.done && (!ordered || pos >= l.from) {
		return // beyond what is known: the search that gets there finds it
	}
	if l.n == fitsKept {
		if i == l.n {
			l.done, l.from = false, pos // the list is full: it is the next to find
			return
		}
		l.done, l.from = false, l.pos[l.n-1] // pushed off the end: found again when needed
		l.n--
	}
	copy(l.pos[i+1:l.n+1], l.pos[i:l.n])
	copy(l.val[i+1:l.n+1], l.val[i:l.n])
	copy(l.rel[i+1:l.n+1], l.rel[i:l.n])
	copy(l.nds[i+1:l.n+1], l.nds[i:l.n])
	l.pos[i], l.val[i], l.rel[i], l.nds[i] = pos, v, nd.rel, nd
	l.n++
}

// lose records that the node at pos stopped being a fit. The fits left
// in the list are still the first ones: none lies between them.
func (l *lbEntry) lose(pos int32) {
	for i := int8(0); i < l.n; i++ {
		if l.pos[i] == pos {
			copy(l.pos[i:], l.pos[i+1:l.n])
			copy(l.val[i:], l.val[i+1:l.n])
			copy(l.rel[i:], l.rel[i+1:l.n])
			copy(l.nds[i:], l.nds[i+1:l.n])
			l.n--
			return
		}
	}
}

// leafFits reports whether the node at pos is a fit for tier t and g GPUs.
func (s *shelf) leafFits(pos, t, g int) bool {
	a := &s.leaves[pos]
	return a.s1[t] != noScore && gpusOK(a.free, g)
}

// fitsIn reports whether tree node k's bounds allow a fit.
func (s *shelf) fitsIn(k, t, g int) bool {
	a := &s.agg[k]
	return a.s1[t] != noScore && gpusOK(a.free, g)
}

// blockEnd is where block j's nodes end.
func (s *shelf) blockEnd(j int) int { return min((j+1)*blockLen, len(s.order)) }

// nextFit returns the first position from from on of a fit for tier t
// and g GPUs, or -1: it looks at the rest of from's block, then climbs the
// tree until a right sibling's bounds allow one, and looks there, first
// in order.
func (s *shelf) nextFit(t, g, from int) int {
	if from >= len(s.order) {
		return -1
	}
	j := from >> blockShift
	for pos := from; pos < s.blockEnd(j); pos++ {
		if s.leafFits(pos, t, g) {
			return pos
		}
	}
	for k, lo, span := s.size+j, j, 1; k > 1; k, span = k/2, span*2 {
		if k&1 == 1 {
			lo -= span
			continue
		}
		slo := lo + span
		if slo*blockLen >= len(s.order) {
			return -1
		}
		if pos := s.firstFitIn(k+1, slo, span, t, g); pos >= 0 {
			return pos
		}
	}
	return -1
}

// firstFitIn returns the first fit in tree node k, which covers span
// blocks from block lo, or -1.
func (s *shelf) firstFitIn(k, lo, span, t, g int) int {
	if lo*blockLen >= len(s.order) || !s.fitsIn(k, t, g) {
		return -1
	}
	if span == 1 {
		for pos := lo * blockLen; pos < s.blockEnd(lo); pos++ {
			if s.leafFits(pos, t, g) {
				return pos
			}
		}
		return -1
	}
	if pos := s.firstFitIn(2*k, lo, span/2, t, g); pos >= 0 {
		return pos
	}
	return s.firstFitIn(2*k+1, lo+span/2, span/2, t, g)
}

// nextBest returns the position of the fit for tier t and g GPUs with the
// least weight-1 score and position after (after, afterPos), or -1: a
// branch and bound over the tree, trying the subtree with the lower least
// score first.
func (s *shelf) nextBest(t, g int, after float64, afterPos int32) int {
	best := int32(-1)
	bestVal := math.Inf(1)
	var stack [64]int32
	stack[0] = 1
	for sp := 1; sp > 0; {
		sp--
		k := int(stack[sp])
		a := &s.agg[k]
		if !gpusOK(a.free, g) || a.s1[t] == noScore || a.s1[t].float() > bestVal {
			continue // no node here has the GPUs free, or a lower score
		}
		if k >= s.size {
			j := k - s.size
			for pos := j * blockLen; pos < s.blockEnd(j); pos++ {
				if !s.leafFits(pos, t, g) {
					continue
				}
				v, p := s.order[pos].s1[t], int32(pos)
				if (v > after || (v == after && p > afterPos)) && (v < bestVal || (v == bestVal && p < best)) {
					best, bestVal = p, v
				}
			}
			continue
		}
		l, r := 2*k, 2*k+1
		if s.agg[r].s1[t] < s.agg[l].s1[t] {
			l, r = r, l
		}
		stack[sp], stack[sp+1] = int32(r), int32(l) // l is popped first
		sp += 2
	}
	return int(best)
}

// bestFirst visits nodes of the tier's view on shelves in the order of a
// lower bound on what a plan there would cost: it expands the subtree with
// the lowest bound first, skips subtrees that skip rejects or whose bound
// is MaxInt64 (nothing there), and ends when stop says the next bound
// cannot beat the best plan found. Plans that cost the same are ranked by
// score: when score is not nil, it gives a lower bound on the score of
// any node with weight-1 score at least s1 on the shelf, and subtrees of
// equal bound are expanded lowest score first, so that stop, given the
// next bound and its score, can end among them too.
//
// skip and bound are given the subtree's (or node's) aggregates, and skip
// its least weight-1 score at the tier.
func (e *Engine) bestFirst(shelves []*shelf, ti int, skip func(a *agg, p *planAgg, s1 float64) bool, bound func(*agg, *planAgg) int64,
	score func(s *shelf, s1 float64) float64, visit func(*node), stop func(bound int64, score float64) bool) {
	h := e.bf[:0]
	push := func(s *shelf, a *agg, p *planAgg, k, lo, hi int) {
		s1 := p.s1[ti].float()
		if skip(a, p, s1) {
			return
		}
		if b := bound(a, p); b != math.MaxInt64 {
			it := bfItem{bound: b, s: s, k: k, lo: lo, hi: hi}
			if score != nil {
				it.score = score(s, s1)
			}
			h = pushItem(h, it)
		}
	}
	for _, s := range shelves {
		s.clean()
		if len(s.order) > 0 {
			push(s, &s.agg[1], &s.plan[1], 1, 0, s.size)
		}
	}
	for len(h) > 0 {
		var it bfItem
		it, h = popItem(h)
		if stop(it.bound, it.score) {
			break
		}
		s := it.s
		switch {
		case it.k < 0: // a node
			if nd := s.order[it.lo]; nd.inView(ti) {
				visit(nd)
			}
		case it.hi-it.lo == 1: // a block: its nodes
			for pos := it.lo * blockLen; pos < s.blockEnd(it.lo); pos++ {
				push(s, &s.leaves[pos], &s.leafPlans[pos], -1, pos, pos+1)
			}
		default:
			mid := (it.lo + it.hi) / 2
			if it.lo*blockLen < len(s.order) {
				push(s, &s.agg[2*it.k], &s.plan[2*it.k], 2*it.k, it.lo, mid)
			}
			if mid*blockLen < len(s.order) {
				push(s, &s.agg[2*it.k+1], &s.plan[2*it.k+1], 2*it.k+1, mid, it.hi)
			}
		}
	}
	e.bf = h[:0]
}

// bfItem is a subtree waiting in bestFirst: tree node k covering blocks
// [lo, hi), or with k < 0 the node at position lo, with its bounds.
type bfItem struct {
	bound     int64
	score     float64
	s         *shelf
	k, lo, hi int
}

// before orders bfItems by bound, then score.
func (it *bfItem) before(o *bfItem) bool {
	return it.bound < o.bound || (it.bound == o.bound && it.score < o.score)
}

func pushItem(h []bfItem, it bfItem) []bfItem {
	h = append(h, it)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
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
		if l < len(h) && h[l].before(&h[m]) {
			m = l
		}
		if r < len(h) && h[r].before(&h[m]) {
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

// eachFree calls f with each node on the shelf whose entry counts at
// least n free GPUs with a window open until at least until (agg
// seconds), skipping the subtrees whose bounds have none. The entries are
// bounds, so f checks the node itself. The shelf must be clean.
func (s *shelf) eachFree(n int, until uint32, f func(*node)) {
	stack := []int{1}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if a := &s.agg[k]; int(a.free) < n || a.until < until {
			continue
		}
		if k < s.size {
			stack = append(stack, 2*k+1, 2*k)
			continue
		}
		first := (k - s.size) << blockShift
		for pos := first; pos < min(first+blockLen, len(s.order)); pos++ {
			if a := &s.leaves[pos]; int(a.free) >= n && a.until >= until {
				f(s.order[pos])
			}
		}
	}
}
