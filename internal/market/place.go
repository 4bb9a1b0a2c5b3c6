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
	// g8, cpu16 and ram32 are g, cpu and ram as agg keeps them, saturated.
	g8       int8
	cpu16    int16
	ram32    int32
	cap      idlegrid.Micros
	w        float64 // reliability weight
	cpu, ram int
	e        *Engine
	mark     uint64 // this search's mark on the nodes it judged
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
	q.ram32 = int32(min(max(q.ram, 0), math.MaxInt32))
	return q
}

// windowNeed is how many seconds of window a job needs to start now. Gold
// and silver need their whole duration. Bronze may run in any fragment
// that fits it whole, or that leaves it the minimum runtime before its
// notice must begin, so that it always gets its full notice.
func (e *Engine) windowNeed(job *idlegrid.Job) int64 {
	d := max(job.DurationSeconds, 1)
	if job.Tier != idlegrid.TierBronze {
		return d
	}
	return min(d, e.cfg.MinRuntimeSeconds+e.cfg.NoticeSeconds)
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
	return cmp.Or(cmp.Compare(a.score, b.score), compareStrings(a.nd.id, b.nd.id))
}

// scoreOf is the reliability-weighted cost of a node: what the renter
// pays per useful GPU-hour, net of the locality credit. Lower wins.
func scoreOf(ask, credit idlegrid.Micros, rel, w float64) float64 {
	if w == 1 {
		return float64(ask-credit) / rel
	}
	return float64(ask-credit) / math.Pow(rel, w)
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

// placeGang places a job on q.n nodes of one region: the region whose best
// q.n nodes have the lowest total score (the preferred region first, when
// it can hold the gang). The best node left out, in any region that could
// have held the gang, sets one clearing score for every winner.
func (e *Engine) placeGang(q *query, sig *signature) (Decision, bool) {
	n := q.n
	if q.job.RegionPreferred {
		if list := e.regionTop(q, sig, q.job.Region, n+1); len(list) >= n {
			return e.award(q, list[:n], list[n:]), true
		}
	}
	var best *regionPick
	var holding []*regionPick
	for _, r := range sig.regions {
		if q.job.RegionPreferred && r == q.job.Region {
			continue
		}
		list := e.regionTop(q, sig, r, n+1)
		if len(list) < n {
			continue
		}
		rp := &regionPick{list: list, minID: list[0].nd.id}
		for i := range list[:n] {
			rp.total += list[i].score
			rp.minID = min(rp.minID, list[i].nd.id)
		}
		holding = append(holding, rp)
		if best == nil || rp.total < best.total || (rp.total == best.total && rp.minID < best.minID) {
			best = rp
		}
	}
	if best == nil {
		return Decision{}, false
	}
	losers := slices.Clone(best.list[n:])
	for _, rp := range holding {
		if rp != best {
			losers = append(losers, rp.list[0])
		}
	}
	slices.SortFunc(losers, func(a, b cand) int { return rank(&a, &b) })
	return e.award(q, best.list[:n], losers), true
}

// regionTop returns up to k best candidates in a region, best first.
func (e *Engine) regionTop(q *query, sig *signature, region string, k int) []cand {
	top := &e.top
	top.reset(k)
	e.offerDirect(q, sig, region, top)
	e.searchClasses(q, sig, sig.byRegion[region], region, top)
	return slices.Clone(top.c)
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
	if t.full() && rank(&x, &t.c[len(t.c)-1]) >= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(t.c, x, func(a, b cand) int { return rank(&a, &b) })
	if t.full() {
		t.c = t.c[:len(t.c)-1]
	}
	t.c = slices.Insert(t.c, i, x)
}

// beyond reports whether a lower bound is surely above a score, allowing
// for rounding between the two ways of computing a score.
func beyond(bound, score float64) bool {
	return bound > score+1e-9*math.Abs(score)+1e-6
}

// walk is the search of one view for one job.
type walk struct {
	q   *query
	v   *view
	top *topK
	// f and off bound the scores of every node from a position on: a node
	// with weight-1 score s1 scores at least s1×f − off. f allows for the
	// job's weight below 1 (see lowFactor) and off for the most credit a
	// node of the view could earn, both at the view's least reliability.
	f, off float64
	credit idlegrid.Micros // the most credit a node of the view could earn; 0 on a class shelf
	main   bool            // a class shelf: nodes caching the job's data are found on their sub-shelves
}

// bound is the least score a node with weight-1 score s1 and reliability
// at least rel could have.
func (w *walk) bound(s1, rel float64) float64 {
	b := s1
	if w.q.w < 1 {
		b *= math.Pow(rel, 1-w.q.w)
	}
	if w.credit > 0 {
		b -= float64(w.credit) / math.Pow(rel, w.q.w)
	}
	return b
}

// classBound is a view to walk and the lowest score a job could find in it.
type classBound struct {
	lb     float64
	v      *view
	credit idlegrid.Micros
	main   bool
}

// searchClasses offers top the best nodes that can take q now among
// classes (of region, when set): their shelves and, for a job that names
// datasets, their sub-shelves of nodes caching them. Views are walked from
// the lowest bound up, until no view left can beat what top holds. Nodes
// that offerDirect judged are skipped.
func (e *Engine) searchClasses(q *query, sig *signature, classes []sigEntry, region string, top *topK) {
	bounds := e.bounds[:0]
	for i := range classes {
		if c := &classes[i]; c.maxJob == 0 || c.maxJob >= q.dur {
			bounds = e.appendBound(bounds, q, c.views[q.ti], 0, true)
		}
	}
	if len(q.job.Datasets) > 0 {
		credit := e.maxCredit(q)
		for i, ds := range q.job.Datasets {
			if slices.ContainsFunc(q.job.Datasets[:i], func(d idlegrid.Dataset) bool { return d.Name == ds.Name }) {
				continue
			}
			for _, c := range e.cachedBy[ds.Name] {
				if sig.accepts[c.idx] && (region == "" || c.key.region == region) && (c.key.maxJob == 0 || c.key.maxJob >= q.dur) {
					bounds = e.appendBound(bounds, q, c.cached[ds.Name].views[q.ti], credit, false)
				}
			}
		}
	}
	// A search walks few views: take the lowest bound left each time.
	for len(bounds) > 0 {
		m := 0
		for i := range bounds {
			if bounds[i].lb < bounds[m].lb {
				m = i
			}
		}
		b := bounds[m]
		if top.full() && beyond(b.lb, top.worst()) {
			break
		}
		bounds[m] = bounds[len(bounds)-1]
		bounds = bounds[:len(bounds)-1]
		w := walk{q: q, v: b.v, top: top, credit: b.credit, main: b.main, f: lowFactor(q.w, b.v.relMin)}
		if b.credit > 0 {
			w.off = float64(b.credit) / math.Pow(b.v.relMin, q.w)
		}
		b.v.clean()
		w.walkAt(1, 0, b.v.size)
	}
	e.bounds = bounds[:0]
}

// appendBound adds a view to search, with the lowest score q could find
// there, unless its root shows it has nothing for q.
func (e *Engine) appendBound(bounds []classBound, q *query, v *view, credit idlegrid.Micros, main bool) []classBound {
	lb := v.lb(q.g)
	if math.IsInf(lb, 1) || !v.root.mayPlace(q) || beyond(lb*v.relMin, float64(q.cap)) {
		return bounds
	}
	lb *= lowFactor(q.w, v.relMin)
	if credit > 0 {
		lb -= float64(credit) / math.Pow(v.relMin, q.w)
	}
	return append(bounds, classBound{lb, v, credit, main})
}

// lowFactor turns a weight-1 score s1 = ask ÷ r into a lower bound on the
// weighted score ask ÷ r^w = s1 × r^(1-w), for every r in [relMin, 1].
func lowFactor(w, relMin float64) float64 {
	if w >= 1 {
		return 1
	}
	return math.Pow(relMin, 1-w)
}

// walkAt walks the subtree k, covering order[lo:hi], offering top the
// nodes that can take the job. Every node from lo on scores at least the
// view-wide bound at s1(lo), so the walk ends once that is beyond what top
// holds; a subtree whose own least reliability bounds its scores beyond
// that, or its asks beyond the cap, is skipped. It reports whether to go on.
func (w *walk) walkAt(k, lo, hi int) bool {
	v, q, top := w.v, w.q, w.top
	if lo >= len(v.order) {
		return true
	}
	a := &v.agg[k]
	if !a.mayPlace(q) {
		return true
	}
	s1, rel := v.s1[lo], float64(a.rel)
	if beyond(s1*v.relMin, float64(q.cap)) || (top.full() && beyond(s1*w.f-w.off, top.worst())) {
		return false
	}
	if beyond(s1*rel, float64(q.cap)) || ((q.w < 1 || w.credit > 0) && top.full() && beyond(w.bound(s1, rel), top.worst())) {
		return true
	}
	if hi-lo > 1 {
		mid := (lo + hi) / 2
		return w.walkAt(2*k, lo, mid) && w.walkAt(2*k+1, mid, hi)
	}
	nd := v.order[lo]
	if nd.mark == w.q.mark || (w.main && len(q.job.Datasets) > 0 && nd.cachesAny(q.job)) {
		return true // judged already, or to be judged with its credit
	}
	nd.mark = w.q.mark
	if c, ok := w.q.e.consider(q, nd); ok {
		top.offer(c)
	}
	return true
}

// offerDirect judges the nodes (in region, when set) of q's own
// reservation, whose index entries understate what q may use there, and
// marks them for the walks to skip. It starts a new search mark.
func (e *Engine) offerDirect(q *query, sig *signature, region string, top *topK) {
	e.mark++
	q.mark = e.mark
	r := e.reservations[q.job.ID]
	if r == nil {
		return
	}
	for _, nd := range r.nodes {
		c := nd.cls
		if c == nil || (region != "" && nd.n.Region != region) || !sig.accepts[c.idx] || (c.key.maxJob > 0 && c.key.maxJob < q.dur) {
			continue
		}
		nd.mark = e.mark
		if x, ok := e.consider(q, nd); ok {
			top.offer(x)
		}
	}
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
	if e.nodeReason(q, nd) != "" {
		return cand{}, false
	}
	ask, credit := nd.asks[q.ti], e.credit(q, nd)
	return cand{nd: nd, ask: ask, credit: credit, score: scoreOf(ask, credit, nd.rel, q.w)}, true
}

// nodeReason is the first per-node constraint nd fails for q now, or "".
func (e *Engine) nodeReason(q *query, nd *node) Reason {
	switch {
	case q.cpu > 0 && nd.n.CPUCores < q.cpu:
		return ReasonCPU
	case q.ram > 0 && nd.n.RAMMB < q.ram:
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
// of another job leaves it only what it can use and finish before the
// reservation starts, or what the reservation will not need.
func (e *Engine) available(q *query, nd *node) int {
	u := nd.free
	if nd.cls != nil && nd.cls.mixed() {
		u = 0
		for i := range nd.slots {
			if nd.slots[i].hold == nil && usableBy(q.job, nd.slots[i].gpu) {
				u++
			}
		}
	}
	if r := nd.res; r != nil && r.jobID != q.job.ID && q.end > r.start {
		u = min(u, nd.freeAt(r.start)-nd.resGPUs)
	}
	return max(u, 0)
}

// credit is the node's data-locality credit for q, in micros per GPU-hour:
// what moving the datasets it caches would cost (size × the configured
// cost per GB), spread over the GPU-hours the job runs there.
func (e *Engine) credit(q *query, nd *node) idlegrid.Micros {
	if len(q.job.Datasets) == 0 || len(nd.datasets) == 0 {
		return 0
	}
	var gb int64
	for _, d := range q.job.Datasets {
		if nd.caches(d.Name) {
			gb += d.SizeGB
		}
	}
	if gb == 0 {
		return 0
	}
	return idlegrid.Micros(gb) * e.cfg.TransferCostMicrosPerGB * 3600 / idlegrid.Micros(int64(q.g)*q.dur)
}

// award makes the decision for winners, priced against the best of losers
// (sorted best first), or the reserve when there are none.
func (e *Engine) award(q *query, winners, losers []cand) Decision {
	var ru *cand
	if len(losers) > 0 {
		ru = &losers[0]
	}
	d := Decision{Picks: make([]Pick, 0, len(winners))}
	for i := range winners {
		d.Picks = append(d.Picks, e.pick(q, &winners[i], ru))
	}
	return d
}

// pick turns a winner into a Pick: its lowest-UUID usable free GPUs, and
// the second-score price.
func (e *Engine) pick(q *query, w *cand, ru *cand) Pick {
	nd := w.nd
	gpus := make([]idlegrid.GPU, 0, q.g)
	for i := range nd.slots {
		if s := &nd.slots[i]; s.hold == nil && usableBy(q.job, s.gpu) && len(gpus) < q.g {
			gpus = append(gpus, s.gpu)
		}
	}
	p := Pick{
		Node: nd.n, GPUs: gpus, Score: w.score,
		AskMicrosPerGPUHour: w.ask, CreditMicrosPerGPUHour: w.credit,
	}
	if ru == nil {
		p.PriceMicrosPerGPUHour = q.cap
		p.PriceNote = reserveNote(q, w)
		return p
	}
	p.RunnerUpNodeID, p.RunnerUpScore = ru.nd.id, ru.score
	raw := ru.score*math.Pow(nd.rel, q.w) + float64(w.credit)
	price := idlegrid.Micros(math.Round(raw))
	price = min(max(price, w.ask), q.cap)
	p.PriceMicrosPerGPUHour = price
	p.PriceNote = secondScoreNote(q, w, ru, raw, price)
	return p
}
