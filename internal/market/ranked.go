package market

import (
	"cmp"
	"math/bits"
	"slices"
	"sort"
)

// A shadow search (shadow.go) wants, on each class shelf, the node with the
// least score at or above a floor. The shelf's order serves that only for
// its key tier and a job of reliability weight 1; for any other tier or
// weight the scores are scattered along it, and a search that can only
// rule subtrees out by their least score reads most of the shelf. So a
// shelf keeps, for the few (tier, weight) pairs shadow searches ask for, a
// list of the tier's view ranked by score: a binary search finds the floor
// and the first node after it that competes is the shelf's best.
//
// What ranks a node there (its ask, reliability and view) changes only
// with a rebuild of the shelf, so a list is good while the shelf's gen is
// the one it was built at. Free GPUs, windows and holds do not matter to a
// shadow competitor, so placements never touch the lists. A rebuild for
// prices alone (a time-of-day multiplier starting or ending) keeps the
// shelf's members, and so each view's nodes: a list then only reranks the
// nodes whose score moved, merging them back in, instead of sorting the
// whole view again. A node whose reputation moved (restand.go), even into
// or out of the gold view, is logged by the shelf, and a list that only
// such moves have passed takes each logged node out of its old place and
// merges it in at its new one, without reading the rest. A list is built
// afresh when a node joins or leaves the shelf: its members.

// rankedMax is how many lists a shelf keeps; asking for another replaces
// the least recently used.
const rankedMax = 12

// rankedList is one ranked view of a shelf.
type rankedList struct {
	gen     uint64 // the shelf's gen when built or reranked; 0: unused
	members uint64 // the shelf's members when built
	t       int
	w       float64
	used    uint64 // the engine's search mark when last used
	rs      []rankedNode
}

// rankedNode is a node of the view and its score at weight w, with no
// locality credit: scoreOf(ask, 0, rel, w), as the search computes it.
type rankedNode struct {
	score float64
	nd    *node
}

// ranked returns the shelf's view of tier t ranked by score at weight w,
// then node ID (the order rank uses), building it when the shelf's members
// changed, patching it when only logged moves did, and reranking it
// otherwise.
func (s *shelf) ranked(t int, w float64, mark uint64) []rankedNode {
	s.clean()
	victim := &s.ranks[0]
	for i := range s.ranks {
		r := &s.ranks[i]
		kept := r.gen != 0 && r.members == s.members
		if kept && r.t == t && r.w == w {
			if r.gen != s.gen && (r.gen < s.movesSince || !r.patch(s.moves, &s.e.rankScratch)) {
				r.rerank(s, &s.e.rankScratch)
			}
			r.gen = s.gen
			r.used = mark
			return r.rs
		}
		if !kept || r.used < victim.used {
			victim = r
		}
	}
	rs := victim.rs[:0]
	for _, nd := range s.order {
		if nd.inView(t) {
			rs = append(rs, rankedNode{score: scoreOf(nd.asks[t], 0, nd.rel, w), nd: nd})
		}
	}
	slices.SortFunc(rs, compareRanked)
	*victim = rankedList{gen: s.gen, members: s.members, t: t, w: w, used: mark, rs: rs}
	return rs
}

// rerank brings r up to date with the shelf s: its nodes' scores, and the
// nodes that left or joined the tier's view (a move into or out of gold
// the log no longer tells). The nodes whose score is unchanged keep their
// order among themselves; the others are taken out, sorted, and merged
// back in from the end, so the whole costs one pass over the list (and
// one over the shelf when the view gained nodes) and a sort of the moved.
func (r *rankedList) rerank(s *shelf, sc *rankScratch) {
	moved, kept := sc.rs[:0], r.rs[:0]
	for _, x := range r.rs {
		nd := x.nd
		if !nd.inView(r.t) {
			continue // it left the view
		}
		if score := scoreOf(nd.asks[r.t], 0, nd.rel, r.w); score != x.score {
			moved = append(moved, rankedNode{score: score, nd: nd})
		} else {
			kept = append(kept, x)
		}
	}
	if len(kept)+len(moved) != s.inView[r.t] { // some joined it: mark those held, add the rest
		s.e.rankMark++
		mark := s.e.rankMark
		for _, xs := range [][]rankedNode{kept, moved} {
			for _, x := range xs {
				x.nd.rankMark = mark
			}
		}
		for _, nd := range s.order {
			if nd.inView(r.t) && nd.rankMark != mark {
				moved = append(moved, rankedNode{score: scoreOf(nd.asks[r.t], 0, nd.rel, r.w), nd: nd})
			}
		}
	}
	slices.SortFunc(moved, compareRanked)
	r.resize(kept, moved)
	merge(r.rs, kept, moved)
	sc.rs = moved[:0]
}

// resize makes r's list as long as kept, its own prefix, and news.
func (r *rankedList) resize(kept, news []rankedNode) {
	if n := len(kept) + len(news); n <= cap(r.rs) {
		r.rs = r.rs[:n]
	} else {
		r.rs = append(kept, news...) // the tail is rewritten by merge
	}
}

// patch brings r up to date with the moves logged since it was made: each
// node moved leaves the place the score r holds for it gives (if it was in
// the view), found by binary search, and is merged back in at its score
// now (if it is in the view now); the rest of the list is copied, not
// read. A node's first move after r was made says what r holds. It
// reports false, having changed nothing, if a node is not where its
// logged score says (then rerank).
func (r *rankedList) patch(log []moveRec, sc *rankScratch) bool {
	first := sort.Search(len(log), func(i int) bool { return log[i].gen > r.gen })
	seen, olds := sc.seen[:0], sc.rs[:0]
	for _, m := range log[first:] {
		if slices.Contains(seen, m.nd) {
			continue
		}
		seen = append(seen, m.nd)
		if m.oldViews&(1<<r.t) != 0 {
			olds = append(olds, rankedNode{score: scoreOf(m.nd.asks[r.t], 0, m.oldRel, r.w), nd: m.nd})
		}
	}
	defer func() { sc.seen, sc.rs = seen[:0], olds[:0] }()
	k := len(olds)
	slices.SortFunc(olds, compareRanked)
	for _, o := range olds {
		if _, found := slices.BinarySearchFunc(r.rs, o, compareRanked); !found {
			return false
		}
	}
	news := olds
	for _, nd := range seen {
		if nd.inView(r.t) {
			news = append(news, rankedNode{score: scoreOf(nd.asks[r.t], 0, nd.rel, r.w), nd: nd})
		}
	}
	news = news[k:]
	slices.SortFunc(news, compareRanked)
	kept, j := r.rs[:0], 0
	for _, x := range r.rs {
		if j < k && x == olds[j] {
			j++
			continue
		}
		kept = append(kept, x)
	}
	r.resize(kept, news)
	merge(r.rs, kept, news)
	return true
}

// merge fills rs with kept, which is rs's own prefix, and news, each in
// rank order, from the end. A few news are placed by binary search, each
// after the kept entries that rank above it, moved in one copy; many are
// merged entry by entry, which then compares less.
func merge(rs, kept, news []rankedNode) {
	i, end := len(kept), len(rs)
	if len(news)*bits.Len(uint(len(kept))) >= len(kept) {
		for j := len(news) - 1; j >= 0; end-- {
			if i > 0 && compareRanked(kept[i-1], news[j]) > 0 {
				i--
				rs[end-1] = kept[i]
			} else {
				rs[end-1] = news[j]
				j--
			}
		}
		return
	}
	for j := len(news) - 1; j >= 0; j-- {
		p := sort.Search(i, func(x int) bool { return compareRanked(kept[x], news[j]) > 0 })
		end -= i - p
		copy(rs[end:], kept[p:i])
		end--
		rs[end] = news[j]
		i = p
	}
}

// rankScratch is what patching and reranking reuse: the entries they
// take out and put in, and the nodes a patch has seen in the log.
type rankScratch struct {
	rs   []rankedNode
	seen []*node
}

// compareRanked is a ranked list's order: score, then node ID.
func compareRanked(a, b rankedNode) int {
	return cmp.Or(cmp.Compare(a.score, b.score), compareStrings(a.nd.id, b.nd.id))
}

// searchRanked offers x the competitors on a class shelf in score order,
// from the floor on, and stops at the first that competes: every node
// after it ranks below it. Nodes caching the job's data score less than
// the list says; they are searched on their sub-shelves instead.
func (x *shadow) searchRanked(s *shelf) {
	q := x.q
	rs := s.ranked(q.ti, q.w, q.mark)
	i := sort.Search(len(rs), func(i int) bool { return rs[i].score >= x.floor })
	for ; i < len(rs); i++ {
		r := &rs[i]
		if x.found && (r.score > x.best.score || (r.score == x.best.score && compareStrings(r.nd.id, x.best.nd.id) >= 0)) {
			return // neither this node nor any after beats the best found
		}
		nd := r.nd
		if (len(q.job.Datasets) > 0 && nd.cachesAny(q.job)) || resumeCredit(q, nd) > 0 {
			continue // its credit, which r.score leaves out, counts where it is offered (shadowRunnerUp)
		}
		if x.competes(nd) {
			x.best, x.found = cand{nd: nd, ask: nd.asks[q.ti], score: r.score}, true
			return
		}
	}
}
