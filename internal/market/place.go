package market

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
)

// query is one job as a search reads it.
type query struct {
	job       *idlegrid.Job
	ti        int   // tier index
	g         int   // GPUs on each node
	n         int   // nodes
	dur       int64 // expected duration, seconds
	now       int64
	needUntil int64 // a node's window must last until this for the job to start now
	end       int64 // when the job ends if it starts now
	// needUntilSec and endSec are needUntil and end in agg seconds, rounded
	// down so that comparing them with rounded-up maxima keeps the bounds.
	needUntilSec, endSec uint32
	// g8, cpu16 and ramGiB are g, cpu and ram as agg keeps them.
	g8       int8
	cpu16    int16
	ramGiB   uint16
	cap      idlegrid.Micros
	w        float64 // reliability weight
	cpu, ram int
	e        *Engine
	mark     uint64     // this search's mark on the nodes it judged
	sig      *signature // the classes that accept the job; nil outside Place
}

func (e *Engine) query(job *idlegrid.Job, now time.Time) query {
	q := query{
		job: job, ti: job.Tier.Rank(), g: max(job.GPUs, 1), n: max(job.Nodes, 1),
		dur: max(job.DurationSeconds, 1), now: now.UnixNano(), cap: job.MaxPriceMicrosPerGPUHour,
		w: job.ReliabilityWeight, cpu: job.CPUCores, ram: job.RAMMB, e: e,
	}
	if q.w <= 0 {
		q.w = 1
	}
	q.end = q.now + q.dur*int64(time.Second)
	q.needUntil = q.now + e.windowNeed(job)*int64(time.Second)
	q.needUntilSec, q.endSec = secDown(q.needUntil), secDown(q.end)
	q.g8 = int8(min(q.g, math.MaxInt8))
	q.cpu16 = int16(min(max(q.cpu, 0), math.MaxInt16))
	q.ramGiB = ramGiB(q.ram)
	return q
}

// windowNeed is how many seconds of window a job needs to start now. Gold
// and silver need their whole duration, and so does bronze that cannot
// resume (resumes): a stop at the window's end would lose its whole run.
// Bronze that checkpoints may run in any fragment that fits it whole, or
// that leaves it a checkpoint interval, and at least the minimum runtime,
// before its notice must begin: it always gets its full notice and always
// keeps some work.
func (e *Engine) windowNeed(job *idlegrid.Job) int64 {
	d := max(job.DurationSeconds, 1)
	if job.Tier != idlegrid.TierBronze || !resumes(job) {
		return d
	}
	return min(d, max(job.CheckpointEverySeconds, e.cfg.MinRuntimeSeconds)+e.cfg.NoticeSeconds)
}

// resumes reports whether a stop keeps the job's work: it saves
// checkpoints, and runs on one node. A gang's checkpoints are spread over
// its nodes, which it seldom gets again all together, so the market counts
// its run from zero after a stop, as it does a job that saves none
// (docs/market.md, "Checkpoints").
func resumes(job *idlegrid.Job) bool {
	return job.CheckpointEverySeconds > 0 && job.Nodes <= 1
}

// cand is a node that can take the job, with its score, and for plans the
// work it would lose or when it could start.
type cand struct {
	nd      *node
	score   float64
	ask     idlegrid.Micros
	credit  idlegrid.Micros
	lost    int64   // plans: GPU-seconds preemption throws away
	start   int64   // plans: earliest start, unix nanos
	victims []*hold // plans: bronze leases to give notice
}

// rank orders candidates by score, then node ID.
func rank(a, b *cand) int {
	if c := cmp.Compare(a.score, b.score); c != 0 {
		return c
	}
	return compareStrings(a.nd.id, b.nd.id)
}

// relPow is math.Pow(rel, w) for a reliability rel in (0, 1], without
// its general path for the common weights: Pow is Sqrt at 0.5 by
// definition, and at 2 it squares the mantissa once and rescales by a
// power of two, which is rel*rel exactly.
func relPow(rel, w float64) float64 {
	switch w {
	case 1:
		return rel
	case 2:
		return rel * rel
	case 0.5:
		return math.Sqrt(rel)
	}
	return math.Pow(rel, w)
}

// scoreOf is the reliability-weighted cost of a node: what the renter
// pays per useful GPU-hour (ask ÷ rel^w), less the locality credit. Lower
// wins. The credit comes off after the division, so that a credit larger
// than the weighted ask still leaves a more reliable node the better one.
func scoreOf(ask, credit idlegrid.Micros, rel, w float64) float64 {
	if w == 1 {
		return float64(ask)/rel - float64(credit)
	}
	return float64(ask)/relPow(rel, w) - float64(credit)
}

// Place decides where job runs now, or what it waits for; see Decision.
// It does not change the engine: Commit records what the coordinator
// stored. Windows and prices are as of the last Advance.
func (e *Engine) Place(job *idlegrid.Job, now time.Time) Decision {
	if len(e.nodes) == 0 {
		return Decision{Reason: "no nodes online"}
	}
	q := e.query(job, now)
	sig := e.signatureOf(job)
	q.sig = sig
	var d Decision
	var ok bool
	if q.n == 1 {
		d, ok = e.placeOne(&q, sig)
	} else {
		d, ok = e.placeGang(&q, sig)
	}
	if ok {
		return d
	}
	return e.plan(&q, sig)
}

// placeOne places a one-node job: the best node wins, the next sets the
// price. With a preferred region, nodes there compete among themselves
// first; the rest only when none of them can take the job.
func (e *Engine) placeOne(q *query, sig *signature) (Decision, bool) {
	top := &e.top
	if q.job.RegionPreferred {
		top.reset(2)
		e.offerDirect(q, sig, q.job.Region, top)
		e.searchClasses(q, sig, sig.byRegion[q.job.Region], q.job.Region, top)
		if len(top.c) > 0 {
			return e.award(q, top.c[:1], top.c[1:]), true
		}
	}
	top.reset(2)
	e.offerDirect(q, sig, "", top)
	e.searchClasses(q, sig, sig.entries, "", top)
	if len(top.c) == 0 {
		return Decision{}, false
	}
	return e.award(q, top.c[:1], top.c[1:]), true
}

// regionPick is a region's best nodes for a gang.
type regionPick struct {
	list  []cand // best first, up to n+1
	total float64
	minID string
}

// beats reports whether rp's gang scores lower than o's, ties going to
// the one with the lowest node ID.
func (rp *regionPick) beats(o *regionPick) bool {
	return rp.total < o.total || (rp.total == o.total && rp.minID < o.minID)
}

// gangScratch is placeGang's memory, kept from one placement to the next
// (a gang searches several regions, and copies its picks from each).
type gangScratch struct {
	cands   []cand // the regions' picks, one after the other
	holding []regionPick
	later   []regionBound
	regions []regionBound
	losers  []cand
}

// reset empties s for the next gang.
func (s *gangScratch) reset() {
	s.cands, s.holding, s.later, s.losers = s.cands[:0], s.holding[:0], s.later[:0], s.losers[:0]
}

// keep copies c into s and returns the copy, which stays as it is until
// the next reset.
func (s *gangScratch) keep(c []cand) []cand {
	start := len(s.cands)
	s.cands = append(s.cands, c...)
	return s.cands[start:len(s.cands):len(s.cands)]
}

// placeGang places a job on q.n nodes of one region: the region whose best
// q.n nodes have the lowest total score (the preferred region first, when
// it can hold the gang). The best node left out, in any region that could
// have held the gang, sets one clearing score for every winner.
//
// Regions are searched from the lowest bound up (see gangRegions). One
// whose bound shows that its best q.n nodes cannot beat the best gang
// found is put off: afterwards it is searched only when its best node
// could still set the price. The decision is the one searching every
// region would make.
func (e *Engine) placeGang(q *query, sig *signature) (Decision, bool) {
	n, gs := q.n, &e.gang
	gs.reset()
	if q.job.RegionPreferred {
		if list := e.regionTop(q, sig, q.job.Region, n+1, nil); len(list) >= n {
			return e.award(q, list[:n], list[n:]), true
		}
	}
	best := -1 // in gs.holding
	for _, rb := range e.gangRegions(q, sig) {
		if best >= 0 {
			avg := gs.holding[best].total / float64(n)
			if beyond(rb.lb, avg) {
				gs.later = append(gs.later, rb) // n nodes there score more than best's n
				continue
			}
			// Its best node alone, a cheaper search than its best n, may
			// show it: n nodes there score at least n times as much.
			first := e.regionTop(q, sig, rb.region, 1, rb.shelves)
			if len(first) == 0 {
				continue // no node there can take the job now
			}
			if beyond(first[0].score, avg) {
				rb.lb = first[0].score
				gs.later = append(gs.later, rb)
				continue
			}
		}
		rp, ok := e.gangIn(q, sig, rb)
		if !ok {
			continue
		}
		if best < 0 || rp.beats(&gs.holding[best]) {
			best = len(gs.holding)
		}
		gs.holding = append(gs.holding, rp)
	}
	if best < 0 {
		return Decision{}, false
	}
	winners := gs.holding[best].list
	gs.losers = append(gs.losers, winners[n:]...)
	for i := range gs.holding {
		if i != best {
			gs.losers = append(gs.losers, gs.holding[i].list[0])
		}
	}
	losers := gs.losers
	slices.SortFunc(losers, func(a, b cand) int { return rank(&a, &b) })
	for _, rb := range gs.later {
		if len(losers) > 0 && beyond(rb.lb, losers[0].score) {
			continue // its best node cannot set the price
		}
		if rp, ok := e.gangIn(q, sig, rb); ok {
			i, _ := slices.BinarySearchFunc(losers, rp.list[0], func(a, b cand) int { return rank(&a, &b) })
			losers = slices.Insert(losers, i, rp.list[0])
		}
	}
	gs.losers = losers
	return e.award(q, winners[:n], losers), true
}

// gangIn returns the region's best q.n+1 nodes for q's gang, with the total
// score of the first q.n; false when the region cannot hold the gang.
func (e *Engine) gangIn(q *query, sig *signature, rb regionBound) (regionPick, bool) {
	list := e.regionTop(q, sig, rb.region, q.n+1, rb.shelves)
	if len(list) < q.n {
		return regionPick{}, false
	}
	rp := regionPick{list: list, minID: list[0].nd.id}
	for i := range list[:q.n] {
		rp.total += list[i].score
		rp.minID = min(rp.minID, list[i].nd.id)
	}
	return rp, true
}

// regionBound is a region a gang may run in, with a lower bound on the
// score of every node there that can take the job now, and the shelves
// that bound it, so that its search need not bound them again (nil when
// the region was not bounded).
type regionBound struct {
	lb      float64
	region  string
	shelves []classBound
}

// gangRegions returns the regions of sig, other than a preferred one
// placeGang tried first, that have a shelf with a node for q, lowest
// bound first. A job holding a reservation gets every region, unbounded:
// its own reserved nodes are judged outside the shelves' bounds.
func (e *Engine) gangRegions(q *query, sig *signature) []regionBound {
	_, reserved := e.reservations[q.job.ID]
	out := e.gang.regions[:0]
	e.gangBounds = e.gangBounds[:0]
	for _, r := range sig.regions {
		if q.job.RegionPreferred && r == q.job.Region {
			continue
		}
		if reserved {
			out = append(out, regionBound{lb: math.Inf(-1), region: r})
		} else if rb, ok := e.regionBound(q, sig, r); ok {
			out = append(out, rb)
		}
	}
	slices.SortStableFunc(out, func(a, b regionBound) int { return cmp.Compare(a.lb, b.lb) })
	e.gang.regions = out
	return out
}

// regionBound bounds the region's shelves that have a node for q (see
// appendBound), keeping them in e.gangBounds, and returns the least bound;
// false when no shelf has a node for q: then no node there can take q now.
func (e *Engine) regionBound(q *query, sig *signature, region string) (regionBound, bool) {
	bounds := e.shelfBounds(q, sig, sig.byRegion[region], region)
	lb := math.Inf(1)
	for i := range bounds {
		lb = min(lb, bounds[i].lb)
	}
	start := len(e.gangBounds)
	e.gangBounds = append(e.gangBounds, bounds...)
	e.bounds = bounds[:0]
	return regionBound{lb: lb, region: region, shelves: e.gangBounds[start:len(e.gangBounds):len(e.gangBounds)]}, len(bounds) > 0
}

// regionTop returns up to k best candidates in a region, best first, kept
// in e.gang until its next reset. When shelves is not nil it holds the
// region's shelves for q, as regionBound bounded them.
func (e *Engine) regionTop(q *query, sig *signature, region string, k int, shelves []classBound) []cand {
	top := &e.top
	top.reset(k)
	e.offerDirect(q, sig, region, top)
	if shelves != nil {
		e.searchBounds(q, append(e.bounds[:0], shelves...), top)
	} else {
		e.searchClasses(q, sig, sig.byRegion[region], region, top)
	}
	return e.gang.keep(top.c)
}

// topK keeps the k best candidates, best first.
type topK struct {
	k int
	c []cand
}

func (t *topK) reset(k int)    { t.k, t.c = k, t.c[:0] }
func (t *topK) full() bool     { return len(t.c) >= t.k }
func (t *topK) worst() float64 { return t.c[len(t.c)-1].score }
func (t *topK) offer(x cand) {
	i := len(t.c)
	switch {
	case i < t.k:
		t.c = append(t.c, x)
	case rank(&x, &t.c[i-1]) >= 0:
		return
	default:
		i-- // x takes the last place, and moves up
	}
	for ; i > 0 && rank(&x, &t.c[i-1]) < 0; i-- {
		t.c[i] = t.c[i-1]
	}
	t.c[i] = x
}

// beyond reports whether a lower bound is surely above a score, allowing
// for rounding between the two ways of computing a score.
func beyond(bound, score float64) bool {
	return bound > score+1e-9*math.Abs(score)+1e-6
}

// walk is the search of one shelf for one job.
type walk struct {
	q   *query
	s   *shelf
	top *topK
	// f and off bound the scores of the nodes of a subtree: a node with
	// weight-1 score s1 scores at least s1×f − off. f allows for the job's
	// weight below 1 at the least reliability of the tier's view (see
	// lowFactor), and off is the most credit a node of the shelf could
	// earn.
	f, off float64
	credit idlegrid.Micros // the most credit a node of the shelf could earn; 0 on a class shelf
	main   bool            // a class shelf: nodes caching the job's data are found on their sub-shelves
}

// bound is the least score a node with weight-1 score s1 and reliability
// at least rel could have.
func (w *walk) bound(s1, rel float64) float64 {
	b := s1
	if w.q.w < 1 {
		b *= relPow(rel, 1-w.q.w)
	}
	return b - float64(w.credit)
}

// classBound is a shelf to walk and the lowest score a job could find
// there, with its cached fits for the job.
type classBound struct {
	lb     float64
	s      *shelf
	fits   *lbEntry
	credit idlegrid.Micros
	main   bool
	// settled says the search judged every fit of the shelf that could
	// beat what top holds, so that it need not walk it.
	settled bool
}

// scale returns f and off for a shelf: a node there with weight-1 score
// s1 scores at least s1×f − off (see walk).
func scale(q *query, s *shelf, credit idlegrid.Micros) (f, off float64) {
	if q.w >= 1 {
		return 1, float64(credit)
	}
	return s.powers(q.ti, q.w).low, float64(credit)
}

// searchClasses offers top the best nodes that can take q now among
// classes (of region, when set): their shelves and, for a job that names
// datasets, their sub-shelves of nodes caching them. Shelves are walked
// from the lowest bound up, until no shelf left can beat what top holds.
// Nodes that offerDirect judged are skipped.
func (e *Engine) searchClasses(q *query, sig *signature, classes []sigEntry, region string, top *topK) {
	e.searchBounds(q, e.shelfBounds(q, sig, classes, region), top)
}

// searchBounds is searchClasses's search of the shelves in bounds, which
// it reorders; they stay valid while the engine does not change.
func (e *Engine) searchBounds(q *query, bounds []classBound, top *topK) {
	// Judge each shelf's first fits, which are most often its best nodes,
	// so that the walks below start with top full and stop early. Both
	// loops take the shelves by bound, and most often stop after a few: the
	// first few are found by selection, and the rest sorted only when the
	// search goes on.
	judged := 0
	for k := range bounds {
		switch {
		case k < selected:
			selectLowest(bounds, k)
		case k == selected:
			slices.SortFunc(bounds[k:], func(a, b classBound) int { return cmp.Compare(a.lb, b.lb) })
		}
		b := &bounds[k]
		if top.full() && beyond(b.lb, top.worst()) {
			break
		}
		judged++
		bf, boff := scale(q, b.s, b.credit)
		b.fits, b.settled = e.judgeFits(q, b, bf, boff, top)
	}
	for k := range judged {
		b := &bounds[k]
		if top.full() && beyond(b.lb, top.worst()) {
			break
		}
		w := walk{q: q, s: b.s, top: top, credit: b.credit, main: b.main}
		w.f, w.off = scale(q, b.s, b.credit)
		switch {
		case b.settled:
		case b.s.ordered[q.ti]:
			w.walkFrom(int(b.fits.pos[b.fits.n-1]))
		default:
			w.walkAt(1, 0, b.s.size)
		}
	}
	e.bounds = bounds[:0]
}

// shelfBounds returns, in e.bounds, the shelves to search for q among
// classes (of region, when set): their shelves and, for a job that names
// datasets, their sub-shelves of nodes caching them, each with its bound
// (see appendBound).
func (e *Engine) shelfBounds(q *query, sig *signature, classes []sigEntry, region string) []classBound {
	touchShelves(e, q, classes, func(c *sigEntry) *shelf { return c.sh })
	bounds := e.bounds[:0]
	for i := range classes {
		if c := &classes[i]; c.maxJob == 0 || c.maxJob >= q.dur {
			bounds = e.appendBound(bounds, q, c.sh, 0, true)
		}
	}
	if len(q.job.Datasets) > 0 {
		credit := e.maxCredit(q)
		for i, ds := range q.job.Datasets {
			if slices.ContainsFunc(q.job.Datasets[:i], func(d idlegrid.Dataset) bool { return d.Name == ds.Name }) {
				continue
			}
			subs := e.subShelves(sig, ds.Name)
			touchShelves(e, q, subs, func(c *subEntry) *shelf { return c.sh })
			for _, c := range subs {
				if (region == "" || c.region == region) && (c.maxJob == 0 || c.maxJob >= q.dur) {
					bounds = e.appendBound(bounds, q, c.sh, credit, false)
				}
			}
		}
	}
	return bounds
}

// touchShelves reads the two cache lines of each shelf that bounding it
// reads (its header and its lbs entry for q), before bounding any: class
// shelves or sub-shelves. These loads do not depend on one another, so
// their cache misses overlap; in appendBound each waits on the one before.
func touchShelves[E sigEntry | subEntry](e *Engine, q *query, entries []E, shelfOf func(*E) *shelf) {
	g := min(q.g, lbMax)
	var sum uint64
	for i := range entries {
		s := shelfOf(&entries[i])
		sum += s.gen + s.lbs[q.ti][g].gen
	}
	e.touched += sum // kept, so that the loads are not optimized away
}

// selected is how many shelves a search takes by selection before it sorts
// the rest.
const selected = 8

// judgeFits judges the shelf's best fits while they can beat what top
// holds, and reports whether that settles the shelf: every fit not listed
// scores at least the last listed one's weight-1 score, scaled as the
// shelf's bound is (bf and boff), so that once a listed fit cannot beat
// top, or none is left, no walk is needed. It lists up to fitsKept fits
// before leaving the rest to a walk.
func (e *Engine) judgeFits(q *query, b *classBound, bf, boff float64, top *topK) (*lbEntry, bool) {
	want := min(top.k+1, fitsKept)
	f := b.s.fits(q.ti, q.g, want)
	loose := q.w != 1 // the shelf's bound is loose: check each fit's own
	for j := 0; ; j++ {
		if j == int(f.n) {
			if f.done || want == fitsKept {
				return f, f.done
			}
			want = fitsKept // every listed fit could matter: list more
			if f = b.s.fits(q.ti, q.g, want); j == int(f.n) {
				return f, f.done
			}
		}
		if top.full() && beyond(f.val[j]*bf-boff, top.worst()) {
			return f, true
		}
		if loose && top.full() && beyond(fitBound(q.w, f.val[j], f.rel[j], b.credit), top.worst()) {
			continue // its own reliability rules it out: no need to read the node
		}
		if beyond(f.val[j]*f.rel[j], float64(q.cap)) {
			continue // it asks more than the cap (its weight-1 score times its reliability)
		}
		e.judge(q, f.nds[j], b.main, top)
	}
}

// fitBound is the least score a node with weight-1 score s1 and
// reliability rel could have for a job of reliability weight w, with at
// most credit of locality credit. The shelf's bound (scale) must allow
// for its least reliability; a fit's own is tighter, and judgeFits has it
// without reading the node.
func fitBound(w, s1, rel float64, credit idlegrid.Micros) float64 {
	b := s1 // ask ÷ rel; the score is ask ÷ rel^w − credit
	switch {
	case w < 1:
		b *= relPow(rel, 1-w)
	case w > 1:
		b /= relPow(rel, w-1)
	}
	return b - float64(credit)
}

// selectLowest moves the lowest bound of bounds[k:] to k.
func selectLowest(bounds []classBound, k int) {
	m := k
	for j := k + 1; j < len(bounds); j++ {
		if bounds[j].lb < bounds[m].lb {
			m = j
		}
	}
	bounds[k], bounds[m] = bounds[m], bounds[k]
}

// appendBound adds a shelf to search, with the lowest score q could find
// there, unless its root shows it has nothing for q.
func (e *Engine) appendBound(bounds []classBound, q *query, s *shelf, credit idlegrid.Micros, main bool) []classBound {
	if s.clean(); !s.root.mayPlace(q) {
		return bounds
	}
	fits := s.fits(q.ti, q.g, 1)
	if fits.n == 0 {
		return bounds
	}
	s1 := fits.val[0]
	if beyond(s1*float64(s.relMin[q.ti]), float64(q.cap)) {
		return bounds
	}
	f, off := scale(q, s, credit)
	return append(bounds, classBound{lb: s1*f - off, s: s, fits: fits, credit: credit, main: main})
}

// lowFactor turns a weight-1 score s1 = ask ÷ r into a lower bound on the
// weighted score ask ÷ r^w = s1 × r^(1-w), for every r in [relMin, 1].
func lowFactor(w, relMin float64) float64 {
	if w >= 1 {
		return 1
	}
	return relPow(relMin, 1-w)
}

// walkFrom walks the nodes from first on, in order: in an ordered tier
// the nodes before first have too few GPUs free, or were judged. It walks
// the rest of first's block, then climbs the tree, walking each right
// sibling's subtree, and stops at the first whose least score cannot beat
// what top holds, since the ones after it score no lower.
func (w *walk) walkFrom(first int) {
	s, q, top := w.s, w.q, w.top
	j := first >> blockShift
	w.walkBlock(j, first)
	for k, lo, span := s.size+j, j, 1; k > 1; k, span = k/2, span*2 {
		if k&1 == 1 {
			lo -= span
			continue
		}
		sib, slo := k+1, lo+span
		if slo*blockLen >= len(s.order) {
			break
		}
		if s1 := s.agg[sib].s1[q.ti]; s1 != noScore && top.full() && beyond(s1.float()*w.f-w.off, top.worst()) {
			break
		}
		w.walkAt(sib, slo, slo+span)
	}
}

// walkAt walks the tree node k, covering blocks [lo, hi), offering top
// the nodes that can take the job. A subtree is skipped when its bounds
// show no node there can take the job now, or none can beat what top
// holds (see skips). Of two children, the one with the lower least score
// is walked first.
func (w *walk) walkAt(k, lo, hi int) {
	s, q := w.s, w.q
	if w.skips(&s.agg[k]) {
		return
	}
	if hi-lo == 1 {
		w.walkBlock(lo, lo*blockLen)
		return
	}
	mid := (lo + hi) / 2
	if mid*blockLen >= len(s.order) {
		w.walkAt(2*k, lo, mid)
		return
	}
	if s.agg[2*k+1].s1[q.ti] < s.agg[2*k].s1[q.ti] {
		w.walkAt(2*k+1, mid, hi)
		w.walkAt(2*k, lo, mid)
	} else {
		w.walkAt(2*k, lo, mid)
		w.walkAt(2*k+1, mid, hi)
	}
}

// walkBlock walks the nodes of block j from position from on.
func (w *walk) walkBlock(j, from int) {
	s := w.s
	for pos := from; pos < s.blockEnd(j); pos++ {
		if a := &s.leaves[pos]; !w.skips(a) && !w.heavyOut(a) {
			w.q.e.judge(w.q, s.order[pos], w.main, w.top)
		}
	}
}

// heavyOut reports whether a node's own entry a shows that it cannot beat
// what top holds for a job that weights reliability above 1, whose score
// is s1 ÷ rel^(w−1). A subtree's least reliability does not bound that
// from below, so skips can only use s1; a node's own reliability does,
// once rounded up again (the entry keeps it rounded down).
func (w *walk) heavyOut(a *agg) bool {
	q := w.q
	if q.w <= 1 || !w.top.full() {
		return false
	}
	relLow := a.rel.float()
	relUp := min(1, float64(math.Nextafter32(float32(relLow), float32(math.Inf(1)))))
	b := a.s1[q.ti].float()/relPow(relUp, q.w-1) - float64(w.credit)
	return beyond(b, w.top.worst())
}

// skips reports whether a subtree's (or node's) bounds show that no node
// there can take the job now (see mayPlace), or that none can beat what
// top holds: its least weight-1 score at the job's tier, at its least
// reliability, is beyond the cap or, as a score, beyond top's worst.
func (w *walk) skips(a *agg) bool {
	q, top := w.q, w.top
	if !a.mayPlace(q) {
		return true
	}
	s1, rel := a.s1[q.ti].float(), a.rel.float()
	if beyond(s1*rel, float64(q.cap)) {
		return true
	}
	if top.full() && (beyond(s1*w.f-w.off, top.worst()) ||
		(q.w < 1 && beyond(w.bound(s1, rel), top.worst()))) {
		return true
	}
	return false
}

// judge offers top the node if it can take q now, unless this search
// judged it already, or will with its credit (on a class shelf, nodes
// caching the job's data are judged on their sub-shelves).
func (e *Engine) judge(q *query, nd *node, main bool, top *topK) {
	if nd.mark == q.mark || (main && len(q.job.Datasets) > 0 && nd.cachesAny(q.job)) {
		return
	}
	nd.mark = q.mark
	if c, ok := e.consider(q, nd); ok {
		top.offer(c)
	}
}

// offerDirect judges the nodes (in region, when set) whose index entries
// understate them for q: those of q's own reservation, where q may use
// what the reservation holds, and the node that keeps q's checkpoint,
// whose credit the index leaves out. It marks them for the walks to skip,
// and starts a new search mark.
func (e *Engine) offerDirect(q *query, sig *signature, region string, top *topK) {
	e.mark++
	q.mark = e.mark
	if nd := e.checkpointNode(q); nd != nil && e.direct(q, sig, region, nd) {
		e.judgeDirect(q, nd, top)
	}
	r := e.reservations[q.job.ID]
	if r == nil {
		return
	}
	for _, nd := range r.nodes {
		if nd.mark != e.mark && e.direct(q, sig, region, nd) {
			e.judgeDirect(q, nd, top)
		}
	}
}

// direct reports whether a search of q (in region, when set) would come
// upon nd: it is in a class sig accepts that takes q's duration, and in
// q's tier's view.
func (e *Engine) direct(q *query, sig *signature, region string, nd *node) bool {
	c := nd.cls
	return c != nil && (region == "" || nd.n.Region == region) && sig.accepts[c.idx] &&
		(c.key.maxJob == 0 || c.key.maxJob >= q.dur) && nd.inView(q.ti)
}

func (e *Engine) judgeDirect(q *query, nd *node, top *topK) {
	nd.mark = e.mark
	if x, ok := e.consider(q, nd); ok {
		top.offer(x)
	}
}

// checkpointNode is the node that keeps the checkpoint q's job resumes
// from, when it is a one-node job with one and the node is in the market.
func (e *Engine) checkpointNode(q *query) *node {
	if q.job.CheckpointNodeID == "" || q.n != 1 || q.job.ResumeSeconds <= 0 {
		return nil
	}
	return e.nodes[q.job.CheckpointNodeID]
}

// maxCredit is the credit of a node that caches every dataset q names.
func (e *Engine) maxCredit(q *query) idlegrid.Micros {
	var gb int64
	for _, d := range q.job.Datasets {
		gb += d.SizeGB
	}
	return idlegrid.Micros(gb) * e.cfg.TransferCostMicrosPerGB * 3600 / idlegrid.Micros(int64(q.g)*q.dur)
}

// consider checks what a class cannot: CPU, RAM, window, price and free
// GPUs, and scores the node.
func (e *Engine) consider(q *query, nd *node) (cand, bool) {
	if !nd.inView(q.ti) || e.nodeReason(q, nd) != "" {
		return cand{}, false
	}
	ask, credit := nd.asks[q.ti], e.credit(q, nd)
	return cand{nd: nd, ask: ask, credit: credit, score: scoreOf(ask, credit, nd.rel, q.w)}, true
}

// avoided reports whether q's job avoids nd's provider.
func avoided(q *query, nd *node) bool {
	return len(q.job.AvoidProviders) > 0 && slices.Contains(q.job.AvoidProviders, nd.n.ProviderID)
}

// belowLevel reports whether nd's trust level is below the least q's job
// asks (JobSpec.MinTrustLevel). It reads the node's record, a cache line
// the search otherwise leaves alone, only for a job that asks a level.
func belowLevel(q *query, nd *node) bool {
	return q.job.MinTrustLevel > 0 && nd.n.Level < q.job.MinTrustLevel
}

// turnsAway reports whether q's job itself rules nd out: it avoids nd's
// provider, or asks a higher trust level than nd's. The classes and their
// views know neither, so each node is asked.
func turnsAway(q *query, nd *node) bool { return avoided(q, nd) || belowLevel(q, nd) }

// nodeReason is the first per-node constraint nd fails for q now, or "".
func (e *Engine) nodeReason(q *query, nd *node) Reason {
	switch {
	case avoided(q, nd):
		return ReasonAvoided
	case belowLevel(q, nd):
		return ReasonTrustLevel
	case q.cpu > 0 && !nd.hasCPU(q.cpu):
		return ReasonCPU
	case q.ram > 0 && !nd.hasRAM(q.ram):
		return ReasonRAM
	case nd.until < q.needUntil:
		return ReasonWindow
	case nd.asks[q.ti] > q.cap:
		return ReasonPrice
	case e.available(q, nd) < q.g:
		return ReasonCapacity
	}
	return ""
}

// available is how many GPUs of nd the job could take now. A reservation
// of another job leaves a job still running at its start only the GPUs
// the reservation cannot use (on a node with more than one kind of GPU)
// and, of those it can, what it will not need.
func (e *Engine) available(q *query, nd *node) int {
	r := nd.res
	blocked := nd.reserved && r.jobID != q.job.ID && q.end > r.start
	if !nd.mixed {
		u := int(nd.free)
		if blocked {
			u = min(u, nd.freeAt(r.start)-nd.resGPUs)
		}
		return max(u, 0)
	}
	spare, shared := 0, 0 // free GPUs the job can use that r cannot, and can
	for i, h := range nd.held {
		switch {
		case h != nil || !usableBy(q.job, nd.gpus[i]):
		case blocked && r.uses(nd.gpus[i]):
			shared++
		default:
			spare++
		}
	}
	if blocked {
		shared = max(0, min(shared, nd.freeFor(r)-nd.resGPUs))
	}
	return spare + shared
}

// longFree is the most GPUs of nd a job still running at the start of
// r, nd's reservation, could take now (see available): the free GPUs r
// cannot use, and of those it can, what it will not need.
func (nd *node) longFree(r *reservation) int {
	spare := nd.spareFor(r)
	return spare + max(0, min(int(nd.free)-spare, nd.freeFor(r)-nd.resGPUs))
}

// credit is the node's locality credit for q, in micros per GPU-hour: what
// moving the datasets it caches would cost (size × the configured cost per
// GB), spread over the GPU-hours the job runs there, and on the node that
// keeps the job's checkpoint, the run it would not repeat (resumeCredit).
func (e *Engine) credit(q *query, nd *node) idlegrid.Micros {
	resume := resumeCredit(q, nd)
	if len(q.job.Datasets) == 0 || !nd.cached { // cached is on the line judging reads
		return resume
	}
	var gb int64
	for _, d := range q.job.Datasets {
		if nd.caches(d.Name) {
			gb += d.SizeGB
		}
	}
	if gb == 0 {
		return resume
	}
	return resume + idlegrid.Micros(gb)*e.cfg.TransferCostMicrosPerGB*3600/idlegrid.Micros(int64(q.g)*q.dur)
}

// resumeCredit is the credit of the node that keeps the checkpoint a
// one-node job resumes from: elsewhere it would run again what the
// checkpoint holds, ResumeSeconds of its duration, which at its cap comes
// to cap × ResumeSeconds ÷ duration a GPU-hour of its run.
func resumeCredit(q *query, nd *node) idlegrid.Micros {
	if q.job.CheckpointNodeID == "" || q.n != 1 || nd.id != q.job.CheckpointNodeID || q.job.ResumeSeconds <= 0 {
		return 0
	}
	return q.cap * idlegrid.Micros(min(q.job.ResumeSeconds, q.dur)) / idlegrid.Micros(q.dur)
}

// award makes the decision for winners, priced against the best of losers
// (sorted best first); when there are none, against the shadow runner-up,
// or the reserve when there is none either.
func (e *Engine) award(q *query, winners, losers []cand) Decision {
	var ru *cand
	busy := false
	if len(losers) > 0 {
		ru = &losers[0]
	} else if c, ok := e.shadowRunnerUp(q, winners); ok {
		ru, busy = &c, true
	}
	d := Decision{Picks: e.newPicks(len(winners))}
	e.placed = e.placed[:0]
	for i := range winners {
		d.Picks = append(d.Picks, e.pick(q, &winners[i], ru, busy))
		e.placed = append(e.placed, winners[i].nd)
	}
	return d
}

// pickSlab is how many picks the engine allocates at once (newPicks).
const pickSlab = 64

// newPicks returns an empty slice with room for n picks, cut from a slab
// that later decisions share: one allocation serves many placements, and
// a decision's picks stay its own (the slice's capacity ends at n, so an
// append copies).
func (e *Engine) newPicks(n int) []Pick {
	if cap(e.picks)-len(e.picks) < n {
		e.picks = make([]Pick, 0, max(pickSlab, n))
	}
	start := len(e.picks)
	e.picks = e.picks[:start+n]
	return e.picks[start : start : start+n]
}

// pickGPUs returns nd's lowest-UUID free GPUs usable by q's job, q.g of
// them; on a node with more than one kind of GPU and another job's
// reservation, those the reservation cannot use first (see available).
// When they lie side by side in nd's GPUs, as one always does, the
// answer shares that slice, which is never changed once set (UpsertNode
// sets a new one), capped so that an append copies; else it is a new one.
func pickGPUs(q *query, nd *node) []idlegrid.GPU {
	var at [idlegrid.MaxGPUsPerNode]int
	var n int
	if r := nd.res; nd.mixed && nd.reserved && r.jobID != q.job.ID {
		n = pickSlots(q, nd, at[:], 0, func(g idlegrid.GPU) bool { return !r.uses(g) })
		n = pickSlots(q, nd, at[:], n, r.uses)
		slices.Sort(at[:n])
	} else {
		n = pickSlots(q, nd, at[:], 0, nil)
	}
	if n == 0 {
		return nil
	}
	if at[n-1]-at[0] == n-1 {
		return nd.gpus[at[0] : at[0]+n : at[0]+n]
	}
	gpus := make([]idlegrid.GPU, n)
	for k := range n {
		gpus[k] = nd.gpus[at[k]]
	}
	return gpus
}

// pickSlots adds to at[:n] the slots of nd's free GPUs, lowest UUID
// first, that q's job can use and that pass only (nil: any), until it
// holds q.g, and returns how many it holds.
func pickSlots(q *query, nd *node, at []int, n int, only func(idlegrid.GPU) bool) int {
	for i, h := range nd.held {
		if n == q.g || n == len(at) {
			break
		}
		if h == nil && (!nd.mixed || usableBy(q.job, nd.gpus[i])) && (only == nil || only(nd.gpus[i])) {
			at[n] = i
			n++
		}
	}
	return n
}

// pick turns a winner into a Pick: its lowest-UUID usable free GPUs, and
// the second-score price (against a shadow runner-up when busy). It records
// what the price note is written from, not the words (Pick.PriceNote).
func (e *Engine) pick(q *query, w *cand, ru *cand, busy bool) Pick {
	nd := w.nd
	p := Pick{
		Node: nd.n, GPUs: pickGPUs(q, nd), Score: w.score,
		AskMicrosPerGPUHour: w.ask, CreditMicrosPerGPUHour: w.credit,
		basis: priceBasis{gang: q.n, rel: nd.rel, weight: q.w, cap: q.cap},
	}
	p.StartBy = startBy(q, nd, p.GPUs)
	if ru == nil {
		p.PriceMicrosPerGPUHour = q.cap
		p.basis.how = pricedReserve
		return p
	}
	p.RunnerUpNodeID, p.RunnerUpScore, p.ShadowRunnerUp = ru.nd.id, ru.score, busy
	p.PriceMicrosPerGPUHour = heldPrice(secondPrice(ru.score, nd.rel, q.w, w.credit), w.ask, q.cap)
	return p
}

// startBy is the latest start at which a job placed on gpus of nd still
// ends in time for what follows on nd: the close of its window, when the
// job's run fits in it (a bronze job that outlives it is given notice
// instead), and for gold and silver, the start of another job's
// reservation of nd, when the job takes GPUs the reservation will need
// (see available; bronze is given notice then). Zero when neither
// follows. A node slow to start the job (a long image pull) would
// otherwise run it past the window, or put the reserved job off.
func startBy(q *query, nd *node, gpus []idlegrid.GPU) time.Time {
	end := int64(always)
	if nd.until != always && q.end <= nd.until {
		end = nd.until
	}
	if takesReserved(q, nd, gpus) {
		end = min(end, nd.res.start)
	}
	if end == always {
		return time.Time{}
	}
	return timeOf(end - q.dur*int64(time.Second)).Truncate(time.Second)
}

// takesReserved reports whether a gold or silver job placed on gpus of nd
// takes GPUs another job's reservation of nd will need: more of those it
// can use than the reservation can spare at its start.
func takesReserved(q *query, nd *node, gpus []idlegrid.GPU) bool {
	r := nd.res
	if !nd.reserved || r.jobID == q.job.ID || q.job.Tier == idlegrid.TierBronze {
		return false
	}
	needed := len(gpus)
	if nd.mixed {
		needed = 0
		for _, g := range gpus {
			if r.uses(g) {
				needed++
			}
		}
	}
	return nd.resShortWithout(needed)
}

// resShortWithout reports whether nd's reservation would be short at its
// start without needed of the GPUs it counts free then: more than it can
// spare.
func (nd *node) resShortWithout(needed int) bool {
	return needed > nd.freeFor(nd.res)-nd.resGPUs
}

// resNeeds reports whether nd's reservation needs GPUs of h, a gold or
// silver hold of another job, at its start: it counted on h having ended
// by then, and without h's GPUs it can use it would be short. It is
// takesReserved asked of a hold already placed: one placed on GPUs the
// reservation could spare, to run past its start, it does not need.
func (nd *node) resNeeds(h *hold) bool {
	r := nd.res
	if !nd.reserved || h.bronze || r.jobID == h.jobID || h.freeBy() > r.start {
		return false
	}
	needed := h.gpus
	if nd.mixed {
		needed = 0
		for i, o := range nd.held {
			if o == h && r.uses(nd.gpus[i]) {
				needed++
			}
		}
	}
	return needed > 0 && nd.resShortWithout(needed)
}

// heldPrice rounds a second-score price to the micro and holds it between
// the ask and the cap while it is still a float: a runner-up's score may
// be beyond what int64 micros hold (a flaky node under a heavy weight),
// and converting it first would wrap it around.
func heldPrice(raw float64, ask, cap idlegrid.Micros) idlegrid.Micros {
	return idlegrid.Micros(min(max(math.Round(raw), float64(ask)), float64(cap)))
}
