package market

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// plan decides what a job that cannot start now waits for: the
// reservation it holds, or for gold and silver a preemption of bronze
// leases (unless GPUs free up as soon without one), or else a new
// reservation. Bronze jobs only wait.
func (e *Engine) plan(q *query, sig *signature) Decision {
	if r := e.reservations[q.job.ID]; r != nil {
		if start, ok := e.reservedStart(q, r); ok {
			if d, ok := e.preemptSooner(q, sig, r, start); ok {
				return d
			}
			return Decision{Reservation: r.public(start), Reason: holdingReason(r, start)}
		}
	}
	late := false // GPUs free up, but only after the job's last start
	if q.job.Tier != idlegrid.TierBronze {
		if d, ok := e.planPreemption(q, sig); ok && !startsTooLate(q, d) {
			if r, ok := e.reserveInstead(q, sig, d); ok {
				return r
			}
			return d
		} else if ok {
			late = true
		}
		if d, ok := e.planReservation(q, sig, math.MaxInt64); ok && !startsTooLate(q, d) {
			return d
		} else if ok {
			late = true
		}
	}
	reason := e.waitReason(q, sig) + e.heldForOthers(q, sig)
	if late {
		latest, _ := q.job.LatestStart()
		reason = strings.TrimSuffix(reason, noPlanNote) + fmt.Sprintf(
			"; nothing is preempted or reserved for it, as the first GPUs to free up would start it after %s, too late to finish by its deadline",
			latest.UTC().Format(time.RFC3339))
	}
	return Decision{Reason: reason}
}

// preemptSooner is a plan that starts q's job, which holds reservation r
// from start, sooner: a preemption, now that a bronze lease too young to
// stop when r was made has passed the minimum runtime (the one r waits
// for, say), or GPUs that free up by the end of its notice anyway. It
// looks only when a bronze lease has passed the minimum runtime since the
// plan last looked, and for gold and silver whose reservation is not a
// preemption's and starts after a notice from now. The index leaves
// reserved nodes out of preemption searches, so r's own nodes are judged
// apart (preemptReserved), and the plan that loses less work wins.
func (e *Engine) preemptSooner(q *query, sig *signature, r *reservation, start int64) (Decision, bool) {
	if q.job.Tier == idlegrid.TierBronze || r.preempting || start <= q.now+e.cfg.NoticeSeconds*int64(time.Second) {
		return Decision{}, false
	}
	e.processEligible(q.now)
	if r.eligibleGen == e.eligibleGen { // Commit, which makes r again, notes what this looked at
		return Decision{}, false
	}
	d, ok := e.planPreemption(q, sig)
	if own, found := e.preemptReserved(q, r); found && (!ok || lostIn(own) < lostIn(d)) {
		d, ok = own, true
	}
	if !ok || startsTooLate(q, d) || d.Reservation.Start.UnixNano() >= start {
		return Decision{}, false
	}
	if ri, ok := e.reserveInstead(q, sig, d); ok {
		return ri, true
	}
	return d, true
}

// preemptReserved is a preemption on the nodes r holds for q's job, when
// each can start it once a notice ends and at least one must stop a bronze
// lease to.
func (e *Engine) preemptReserved(q *query, r *reservation) (Decision, bool) {
	if len(r.nodes) != q.n {
		return Decision{}, false
	}
	notice := e.cfg.NoticeSeconds * int64(time.Second)
	set, victims := make([]cand, 0, len(r.nodes)), 0
	for _, nd := range r.nodes {
		if !preemptable(q, nd, notice) {
			return Decision{}, false
		}
		c, ok := e.victimsOn(q, nd)
		if !ok {
			return Decision{}, false
		}
		set, victims = append(set, c), victims+len(c.victims)
	}
	if victims == 0 {
		return Decision{}, false
	}
	return e.preemptionDecision(q, set), true
}

// lostIn is the work a preemption decision throws away.
func lostIn(d Decision) int64 {
	var lost int64
	for _, p := range d.Preemptions {
		lost += p.LostGPUSeconds
	}
	return lost
}

// startsTooLate reports whether d, a preemption or a reservation, would
// start q's job after the last start that finishes it by its deadline: a
// job the scheduler will cancel then must not hold GPUs or stop bronze.
func startsTooLate(q *query, d Decision) bool {
	latest, ok := q.job.LatestStart()
	return ok && d.Reservation != nil && d.Reservation.Start.After(latest)
}

// reserveInstead is a reservation for q that starts no later than
// preemption d would let it: GPUs that free up by the end of d's notice
// anyway, so that no bronze work is thrown away for nothing.
func (e *Engine) reserveInstead(q *query, sig *signature, d Decision) (Decision, bool) {
	r, ok := e.planReservation(q, sig, d.Reservation.Start.UnixNano())
	if !ok || r.Reservation.Start.After(d.Reservation.Start) {
		return Decision{}, false
	}
	return r, true
}

// reservedStart re-estimates when a job's reservation lets it start, and
// reports whether the reservation still holds: every node online, still
// reserved, still meeting the job's constraints, asking within its cap
// now and then (a re-offer may change them), and for gold and silver open
// long enough from then on.
func (e *Engine) reservedStart(q *query, r *reservation) (int64, bool) {
	start := r.start
	for i, nd := range r.nodes {
		if e.nodes[nd.id] != nd || nd.res != r || e.staticReason(nd, q.job) != "" ||
			(q.cpu > 0 && !nd.hasCPU(q.cpu)) || (q.ram > 0 && !nd.hasRAM(q.ram)) {
			return 0, false
		}
		t := e.earliest(q, nd, r.gpus[i])
		if t < 0 {
			return 0, false
		}
		start = max(start, t)
	}
	for _, nd := range r.nodes {
		if !affordable(q, nd, start) ||
			(q.job.Tier != idlegrid.TierBronze && nd.until < start+q.dur*int64(time.Second)) {
			return 0, false
		}
	}
	return start, true
}

// affordable reports whether nd asks within q's cap for q's tier both now
// and at start, when a plan would start q there: a time-of-day price
// window may raise the ask by then, and the lease locks the ask of its
// placement. (The index rules nodes out by the ask now.)
func affordable(q *query, nd *node, start int64) bool {
	return nd.asks[q.ti] <= q.cap && nd.askAt(q.ti, start) <= q.cap
}

// earliest is when g GPUs of nd that the job can use should be free, as
// holds end; -1 when they never will.
func (e *Engine) earliest(q *query, nd *node, g int) int64 {
	mixed := nd.cls.mixed()
	usable := func(h *hold) int {
		if !mixed {
			return h.gpus
		}
		n := 0
		for i, x := range nd.held {
			if x == h && usableBy(q.job, nd.gpus[i]) {
				n++
			}
		}
		return n
	}
	u := int(nd.free)
	if mixed {
		u = 0
		for i, x := range nd.held {
			if x == nil && usableBy(q.job, nd.gpus[i]) {
				u++
			}
		}
	}
	if u >= g {
		return q.now
	}
	holds := append(e.holdScratch[:0], nd.holds...)
	e.holdScratch = holds
	slices.SortFunc(holds, func(a, b *hold) int { return cmp.Compare(a.freeBy(), b.freeBy()) })
	for _, h := range holds {
		if u += usable(h); u >= g {
			return max(h.freeBy(), q.now)
		}
	}
	return -1
}

// planPreemption finds bronze leases to give notice so that a gold or
// silver job can start when the notice ends: on each node the cheapest set
// of leases in lost work, and the nodes (in one region) that lose the
// least in all, then score. Leases younger than the minimum runtime, and
// nodes reserved for another job, are left alone.
func (e *Engine) planPreemption(q *query, sig *signature) (Decision, bool) {
	notice := e.cfg.NoticeSeconds * int64(time.Second)
	if q.n == 1 {
		c, ok := e.preemptOne(q, sig)
		if !ok {
			return Decision{}, false
		}
		return e.preemptionDecision(q, []cand{c}), true
	}
	e.processEligible(q.now)
	less := func(a, b *cand) int { return cmp.Or(cmp.Compare(a.lost, b.lost), rank(a, b)) }
	cands := e.planRegions(q, sig, preemptSkip(q, notice),
		func(a *agg, p *planAgg) int64 {
			if gpusOK(a.free, q.g) {
				return 0 // a node here may have room without preempting
			}
			return lossBound(q, a, p, q.now+notice, false)
		},
		func(nd *node) (cand, bool) {
			if (nd.res != nil && nd.res.jobID != q.job.ID) || !preemptable(q, nd, notice) {
				return cand{}, false
			}
			return e.victimsOn(q, nd)
		},
		less, func(c *cand) int64 { return c.lost })
	set := choosePlan(q, cands, less,
		func(set []cand) (int64, float64) {
			var score float64
			for _, c := range set {
				score += c.score
			}
			return stoppedLoss(set, q.now), score
		})
	victims := 0
	for _, c := range set {
		victims += len(c.victims)
	}
	if victims == 0 {
		return Decision{}, false
	}
	return e.preemptionDecision(q, set), true
}

// preemptOne finds the node where freeing q.g GPUs loses the least work
// (then the best score, then the lowest ID), in the preferred region
// first: a best-first walk, bounded by lossBound.
func (e *Engine) preemptOne(q *query, sig *signature) (cand, bool) {
	notice := e.cfg.NoticeSeconds * int64(time.Second)
	e.processEligible(q.now)
	var best cand // found when best.nd is set
	skip := preemptSkip(q, notice)
	bound := func(a *agg, p *planAgg) int64 { return lossBound(q, a, p, q.now+notice, true) }
	visit := func(nd *node) {
		if nd.res != nil || !preemptable(q, nd, notice) {
			return
		}
		if c, ok := e.victimsOn(q, nd); ok && len(c.victims) > 0 {
			if best.nd == nil || cmp.Or(cmp.Compare(c.lost, best.lost), rank(&c, &best)) < 0 {
				best = c
			}
		}
	}
	stop := func(b int64, score float64) bool {
		return best.nd != nil && (b > best.lost || (b == best.lost && score > best.score))
	}
	for _, shelves := range e.planShelves(q, sig) {
		e.bestFirst(shelves, q.ti, skip, bound, e.scoreBound(q), visit, stop)
		if best.nd != nil {
			return best, true
		}
	}
	return cand{}, false
}

// preemptSkip rules out subtrees where no node could start q once a
// notice ends: none is open long enough, big enough, within the cap, or
// has q.g GPUs free or held by bronze leases without notice, or by holds
// that end by then (which agg does not count: it knows only when the
// first hold there ends).
func preemptSkip(q *query, notice int64) func(*agg, *planAgg, float64) bool {
	noticeEnd := q.now + notice
	minUntil := secDown(noticeEnd + q.dur*int64(time.Second))
	return func(a *agg, p *planAgg, s1 float64) bool {
		return a.until < minUntil || !a.cpuOK(q.cpu) || !a.ramOK(q.ram) || !gpusOK(a.gpus, q.g) ||
			(!gpusOK(a.preempt, q.g) && secNanos(p.firstEnd) > noticeEnd) || beyond(s1*a.rel.float(), float64(q.cap))
	}
}

// preemptable reports whether nd could start q once a notice ends: its
// window then lasts q's whole run, to the nanosecond (the index's bounds
// are in whole seconds), its ask then is within the cap, and it has the
// CPU and RAM q asks for.
func preemptable(q *query, nd *node, notice int64) bool {
	start := q.now + notice
	return nd.until >= start+q.dur*int64(time.Second) && affordable(q, nd, start) &&
		(q.cpu <= 0 || nd.hasCPU(q.cpu)) && (q.ram <= 0 || nd.hasRAM(q.ram))
}

// lossBound is the least work preempting for q could lose on any node of
// a subtree that needs a victim: the time since the subtree's latest
// bronze restart, once for each GPU still needed beyond its most free
// ones. A hold that may end by noticeEnd, when the preemption would
// start, frees its GPUs at no loss (victimsOn counts them free), and the
// subtree does not say how many: then it counts one GPU.
//
// With bands set, for a search that judges only nodes where q needs a
// victim, it is no less than the time since the restart the subtree's
// band keeps for q's size (see coverRestarts), while that holds: from the
// time the plan entries were computed (at the latest eligibleAt) on, and
// before any hold they do not count free may end (laterEnd).
func lossBound(q *query, a *agg, p *planAgg, noticeEnd int64, bands bool) int64 {
	if p.restart[0] == 0 {
		return math.MaxInt64
	}
	since := func(r uint32) int64 { return max(0, (q.now-secNanos(r))/int64(time.Second)) }
	least := since(p.restart[0])
	if secNanos(p.firstEnd) > noticeEnd { // every hold there ends after the notice
		least *= int64(max(1, q.g-int(a.free)))
	}
	if b := coverBand(q.g); bands && b > 0 && q.now >= q.e.eligibleAt && secNanos(p.laterEnd) > noticeEnd {
		if p.restart[b] == 0 {
			return math.MaxInt64 // no node there could free q.g GPUs
		}
		least = max(least, since(p.restart[b]))
	}
	return least
}

// planShelves returns the shelves a one-node plan searches, in the order
// it searches them: the preferred region's first, when the job has one.
// The answer is the engine's scratch, good until the next call.
func (e *Engine) planShelves(q *query, sig *signature) [][]*shelf {
	pref, rest := e.planScratch[0][:0], e.planScratch[1][:0]
	for _, c := range sig.all {
		if c.key.maxJob > 0 && c.key.maxJob < q.dur {
			continue
		}
		if q.job.RegionPreferred && c.key.region == q.job.Region {
			pref = append(pref, &c.shelf)
		} else {
			rest = append(rest, &c.shelf)
		}
	}
	e.planScratch[0], e.planScratch[1] = pref, rest
	e.planOrder = append(e.planOrder[:0], pref, rest)
	if q.job.RegionPreferred {
		return e.planOrder
	}
	return e.planOrder[1:]
}

// preemptionDecision gives notice to the victims on set's nodes and
// reserves the nodes from the end of the notice.
func (e *Engine) preemptionDecision(q *query, set []cand) Decision {
	notice := e.cfg.NoticeSeconds * int64(time.Second)
	start := q.now + notice
	d := Decision{Reservation: &Reservation{JobID: q.job.ID, Start: timeOf(start), Preempting: true}}
	for _, c := range set {
		d.Reservation.Nodes = append(d.Reservation.Nodes, ReservedNode{NodeID: c.nd.id, GPUs: q.g})
	}
	var lost int64
	for _, h := range stopped(set) {
		p := Preemption{
			LeaseID: h.leaseID, JobID: h.jobID, NodeID: h.nodeID, GPUs: h.gpus,
			NoticeSeconds: e.cfg.NoticeSeconds, LostGPUSeconds: h.lostGPUSeconds(q.now),
		}
		d.Preemptions = append(d.Preemptions, p)
		lost += p.LostGPUSeconds
	}
	d.Reason = fmt.Sprintf("preempting %d bronze %s (%d GPU-seconds of work lost); it starts when %s %ds notice ends, at %s",
		len(d.Preemptions), plural(len(d.Preemptions), "lease", "leases"), lost,
		plural(len(d.Preemptions), "its", "their"), e.cfg.NoticeSeconds, timeOf(start).Format(time.RFC3339))
	return d
}

// stopped lists the leases that preempting set's victims stops: each
// victim, and after it the rest of its gang (in lease ID order), once
// each though two victims share a gang.
func stopped(set []cand) []*hold {
	var out []*hold
	for _, c := range set {
		for _, v := range c.victims {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
			if v.gang == nil {
				continue
			}
			sibs := slices.DeleteFunc(v.siblings(), func(s *hold) bool { return s == v || slices.Contains(out, s) })
			slices.SortFunc(sibs, func(a, b *hold) int { return compareStrings(a.leaseID, b.leaseID) })
			out = append(out, sibs...)
		}
	}
	return out
}

// stoppedLoss is the work preempting set's victims loses: each lease it
// stops counted once, though two victims share a gang.
func stoppedLoss(set []cand, now int64) int64 {
	var lost int64
	for _, h := range stopped(set) {
		lost += h.lostGPUSeconds(now)
	}
	return lost
}

// victimsOn finds the bronze leases on nd whose stop frees enough GPUs for
// q while losing the least work. A hold that should end by the end of the
// notice (a lease of any tier at its time limit or its own notice's end,
// or a claim) is no victim: its GPUs are free by then anyway.
func (e *Engine) victimsOn(q *query, nd *node) (cand, bool) {
	if turnsAway(q, nd) {
		return cand{}, false
	}
	ask, credit := nd.asks[q.ti], e.credit(q, nd)
	c := cand{nd: nd, ask: ask, credit: credit, score: scoreOf(ask, credit, nd.rel, q.w)}
	free := 0
	for i, x := range nd.held {
		if x == nil && usableBy(q.job, nd.gpus[i]) {
			free++
		}
	}
	if free >= q.g {
		return c, true
	}
	minRun := e.cfg.MinRuntimeSeconds * int64(time.Second)
	noticeEnd := q.now + e.cfg.NoticeSeconds*int64(time.Second)
	var pool []*hold
	var counts []int
	var losses []int64
	for _, h := range nd.holds {
		n := 0
		for i, x := range nd.held {
			if x == h && usableBy(q.job, nd.gpus[i]) {
				n++
			}
		}
		switch {
		case n == 0:
		case h.freeBy() <= noticeEnd:
			free += n
		case h.preemptible(q.now, minRun):
			pool, counts, losses = append(pool, h), append(counts, n), append(losses, h.victimLoss(q.now))
		}
	}
	need := q.g - free
	if need <= 0 {
		return c, true
	}
	picked, lost, ok := minLossCover(counts, losses, need)
	if !ok {
		return cand{}, false
	}
	for _, i := range picked {
		c.victims = append(c.victims, pool[i])
	}
	slices.SortFunc(c.victims, func(a, b *hold) int { return compareStrings(a.leaseID, b.leaseID) })
	c.lost = lost
	return c, true
}

// minLossCover chooses items whose counts sum to at least need with the
// least total loss (a 0/1 knapsack over counts capped at need). It returns
// the chosen indexes, their loss, and false when all items are too few.
func minLossCover(counts []int, losses []int64, need int) ([]int, int64, bool) {
	const inf = int64(1) << 62
	dp := make([]int64, need+1)
	for j := range dp {
		dp[j] = inf
	}
	dp[0] = 0
	from := make([][]int, len(counts)) // from[i][j]: the state item i extended to reach j, or -1
	for i, c := range counts {
		from[i] = make([]int, need+1)
		for j := range from[i] {
			from[i][j] = -1
		}
		for j := need; j >= 0; j-- {
			if dp[j] == inf {
				continue
			}
			nj := min(need, j+c)
			if v := dp[j] + losses[i]; v < dp[nj] {
				dp[nj], from[i][nj] = v, j
			}
		}
	}
	if dp[need] == inf {
		return nil, 0, false
	}
	var picked []int
	for i, j := len(counts)-1, need; i >= 0 && j > 0; i-- {
		if f := from[i][j]; f >= 0 {
			picked = append(picked, i)
			j = f
		}
	}
	return picked, dp[need], true
}

// planReservation reserves, for a gold or silver job that cannot start
// now, the GPUs that free up soonest on nodes whose window then still
// covers the job (in one region for a gang; ties by score), so that work
// placed later cannot delay it (EASY backfill). A caller that wants only
// a reservation starting by by (unix nanos; MaxInt64: any) gets the one a
// full search would give whenever that starts by then; otherwise, one
// that starts later or none.
func (e *Engine) planReservation(q *query, sig *signature, by int64) (Decision, bool) {
	if q.n == 1 {
		c, ok := e.reserveOne(q, sig, by)
		if !ok {
			return Decision{}, false
		}
		return reservationDecision(q, []cand{c}), true
	}
	less := func(a, b *cand) int { return cmp.Or(cmp.Compare(a.start, b.start), rank(a, b)) }
	skip, bound := reserveBounds(q)
	cands := e.planRegions(q, sig, skip, bound, func(nd *node) (cand, bool) { return e.reservable(q, nd) },
		less, func(c *cand) int64 { return c.start })
	set := choosePlan(q, cands, less,
		func(set []cand) (int64, float64) {
			var start int64
			var score float64
			for _, c := range set {
				start, score = max(start, c.start), score+c.score
			}
			return start, score
		})
	if set == nil {
		return Decision{}, false
	}
	return reservationDecision(q, set), true
}

// reserveOne finds the node whose GPUs free up first for q with a window
// that then still covers it (then the best score, then the lowest ID), in
// the preferred region first: a best-first walk, bounded by each
// subtree's earliest hold end. Past by it stops (but for a preferred
// region, whose nodes win at any start).
func (e *Engine) reserveOne(q *query, sig *signature, by int64) (cand, bool) {
	if q.job.RegionPreferred {
		by = math.MaxInt64
	}
	var best cand // found when best.nd is set
	skip, bound := reserveBounds(q)
	visit := func(nd *node) {
		if c, ok := e.reservable(q, nd); ok {
			if best.nd == nil || cmp.Or(cmp.Compare(c.start, best.start), rank(&c, &best)) < 0 {
				best = c
			}
		}
	}
	stop := func(b int64, score float64) bool {
		return b > by || (best.nd != nil && (b > best.start || (b == best.start && score > best.score)))
	}
	for _, shelves := range e.planShelves(q, sig) {
		e.bestFirst(shelves, q.ti, skip, bound, e.scoreBound(q), visit, stop)
		if best.nd != nil {
			return best, true
		}
	}
	return cand{}, false
}

// reserveBounds are the subtree tests of a reservation search: skip rules
// out subtrees with no node that could hold the job in time, and bound is
// the earliest any node there could start it. A one-node job plans only
// when no node can take it now, so a node with the GPUs free now is not
// reservable either (reservable's tests of it, the window it is in, its
// ask now, its size, another job's reservation, do not depend on the
// start), and a subtree is bounded by its first hold end; a gang may wait
// with nodes that could start now, too few in one region. (Bounding
// subtrees with free GPUs at now made the check whether waiting beats
// preempting walk every one of them first.)
func reserveBounds(q *query) (skip func(*agg, *planAgg, float64) bool, bound func(*agg, *planAgg) int64) {
	dur := q.dur * int64(time.Second)
	bound = func(a *agg, p *planAgg) int64 {
		if q.n > 1 && gpusOK(a.free, q.g) {
			return q.now
		}
		return max(q.now, secNanos(p.firstEnd))
	}
	skip = func(a *agg, p *planAgg, s1 float64) bool {
		b := bound(a, p)
		return a.until < secDown(q.now+dur) || !a.cpuOK(q.cpu) || !a.ramOK(q.ram) || !gpusOK(a.gpus, q.g) ||
			beyond(s1*a.rel.float(), float64(q.cap)) || b == always || secNanos(a.until) < b+dur
	}
	return skip, bound
}

// planRegions finds, for a gang, the q.n best candidates of each region by
// less: best-first within the region, until the next subtree's bound (on
// key) is beyond its q.n-th candidate. try judges a node.
func (e *Engine) planRegions(q *query, sig *signature, skip func(*agg, *planAgg, float64) bool, bound func(*agg, *planAgg) int64,
	try func(*node) (cand, bool), less func(a, b *cand) int, key func(*cand) int64) []cand {
	var all []cand
	var shelves []*shelf
	scoreBound := e.scoreBound(q)
	for _, r := range sig.regions {
		shelves = shelves[:0]
		for _, c := range sig.byRegion[r] {
			if c.maxJob == 0 || c.maxJob >= q.dur {
				shelves = append(shelves, c.sh)
			}
		}
		var top []cand
		visit := func(nd *node) {
			c, ok := try(nd)
			if !ok || (len(top) == q.n && less(&c, &top[q.n-1]) >= 0) {
				return
			}
			i, _ := slices.BinarySearchFunc(top, c, func(a, b cand) int { return less(&a, &b) })
			top = slices.Insert(top, i, c)
			if len(top) > q.n {
				top = top[:q.n]
			}
		}
		stop := func(b int64, score float64) bool {
			if len(top) < q.n {
				return false
			}
			last := &top[q.n-1]
			return b > key(last) || (b == key(last) && score > last.score)
		}
		e.bestFirst(shelves, q.ti, skip, bound, scoreBound, visit, stop)
		all = append(all, top...)
	}
	return all
}

// scoreBound returns, for bestFirst, the least score q could give a node
// on a shelf with weight-1 score at least s1: scaled for q's reliability
// weight, less the most credit any node could earn.
func (e *Engine) scoreBound(q *query) func(s *shelf, s1 float64) float64 {
	credit := float64(e.maxCredit(q))
	if q.job.CheckpointNodeID != "" {
		credit += float64(q.cap) // resumeCredit is at most the cap
	}
	return func(s *shelf, s1 float64) float64 {
		f, _ := scale(q, s, 0)
		return s1*f - credit
	}
}

// reservable is nd as a candidate for q's reservation: when q.g GPUs free
// up there, if its window then still covers q and its ask, now and then,
// is within q's cap.
func (e *Engine) reservable(q *query, nd *node) (cand, bool) {
	if nd.res != nil || nd.asks[q.ti] > q.cap || (q.cpu > 0 && !nd.hasCPU(q.cpu)) || (q.ram > 0 && !nd.hasRAM(q.ram)) || turnsAway(q, nd) {
		return cand{}, false
	}
	t := e.earliest(q, nd, q.g)
	if t < 0 || nd.until < t+q.dur*int64(time.Second) || !affordable(q, nd, t) {
		return cand{}, false
	}
	ask, credit := nd.asks[q.ti], e.credit(q, nd)
	return cand{nd: nd, ask: ask, credit: credit, score: scoreOf(ask, credit, nd.rel, q.w), start: t}, true
}

// reservationDecision reserves set's nodes from the latest of their starts.
func reservationDecision(q *query, set []cand) Decision {
	var start int64
	r := &Reservation{JobID: q.job.ID}
	nodes, gpus := make([]*node, 0, len(set)), make([]int, 0, len(set))
	for _, c := range set {
		start = max(start, c.start)
		r.Nodes = append(r.Nodes, ReservedNode{NodeID: c.nd.id, GPUs: q.g})
		nodes, gpus = append(nodes, c.nd), append(gpus, q.g)
	}
	r.Start = timeOf(start)
	return Decision{Reservation: r, Reason: fmt.Sprintf(
		"no node can take it now; reserved %s from %s (shorter jobs may use them until then)",
		reservedList(nodes, gpus), r.Start.Format(time.RFC3339))}
}

// choosePlan picks q.n candidates in one region: the first q.n of a region
// by less, the preferred region when it has enough, else the region whose
// set has the lowest key, then total score... then lowest node ID.
func choosePlan(q *query, cands []cand, less func(a, b *cand) int, key func(set []cand) (int64, float64)) []cand {
	slices.SortFunc(cands, func(a, b cand) int { return less(&a, &b) })
	byRegion := map[string][]cand{}
	var regions []string
	for _, c := range cands {
		r := c.nd.n.Region
		if byRegion[r] == nil {
			regions = append(regions, r)
		}
		byRegion[r] = append(byRegion[r], c)
	}
	if q.job.RegionPreferred {
		if set := byRegion[q.job.Region]; len(set) >= q.n {
			return set[:q.n]
		}
	}
	var best []cand
	var bestA int64
	var bestB float64
	var bestID string
	for _, r := range regions {
		set := byRegion[r]
		if len(set) < q.n {
			continue
		}
		set = set[:q.n]
		a, b := key(set)
		id := set[0].nd.id
		for _, c := range set {
			id = min(id, c.nd.id)
		}
		if best == nil || a < bestA || (a == bestA && (b < bestB || (b == bestB && id < bestID))) {
			best, bestA, bestB, bestID = set, a, b, id
		}
	}
	return best
}

// waitReason says, cheaply, why a job waits: the class-level rejections
// exactly, and that the nodes that match have no room for it now.
func (e *Engine) waitReason(q *query, sig *signature) string {
	key := waitKey{ti: q.ti, g: q.g, n: q.n, dur: q.dur, need: e.windowNeed(q.job), cap: q.cap, bronze: q.job.Tier == idlegrid.TierBronze,
		minLevel: q.job.MinTrustLevel, avoid: avoidKey(q.job.AvoidProviders)}
	if sig.waitGen != e.memberGen || sig.waitAskGen != e.askGen || sig.waitLevelGen != e.levelGen {
		clear(sig.waits)
		sig.waitGen, sig.waitAskGen, sig.waitLevelGen = e.memberGen, e.askGen, e.levelGen
	}
	if r, ok := sig.waits[key]; ok {
		return r
	}
	r := e.composeWaitReason(q, sig)
	if sig.waits == nil {
		sig.waits = map[waitKey]string{}
	}
	if len(sig.waits) < maxWaits {
		sig.waits[key] = r
	}
	return r
}

// waitKey is what a wait reason reads of a job, besides its signature.
type waitKey struct {
	ti, g, n  int
	dur, need int64
	cap       idlegrid.Micros
	bronze    bool
	minLevel  int
	avoid     string // the providers the job avoids (avoidKey)
}

// avoidKey is a list of providers to avoid as one string, whatever its
// order and repeats: a waitKey's part. "" for none.
func avoidKey(providers []string) string {
	if len(providers) == 0 {
		return ""
	}
	sorted := slices.Clone(providers)
	slices.Sort(sorted)
	return strings.Join(slices.Compact(sorted), "\x00")
}

// noPlanNote ends the wait reason of a gold or silver job that found no
// preemption or reservation.
const noPlanNote = "; no bronze lease can be preempted for it and no GPUs can be reserved"

// maxWaits bounds the wait reasons a signature keeps.
const maxWaits = 64

func (e *Engine) composeWaitReason(q *query, sig *signature) string {
	counts := map[Reason]int{}
	for i, c := range sig.rejected { // the tier comes first in check order
		counts[ReasonTier] += c.count - c.sold[q.ti]
		counts[sig.reasons[i]] += c.sold[q.ti]
	}
	matching := 0
	inRegion := map[string]int{} // matching nodes by region, for a gang
	var cheapest idlegrid.Micros // the least ask of a matching node; 0: none
	for _, c := range sig.all {
		counts[ReasonTier] += c.count - c.sold[q.ti]
		switch {
		case c.key.maxJob > 0 && c.key.maxJob < q.dur:
			counts[ReasonMaxDuration] += c.sold[q.ti]
		default:
			counts[ReasonReliability] += c.sold[q.ti] - c.inView[q.ti]
			few := 0
			if c.allUsable(q.job) { // else a node's usable GPUs are not its GPUs: count none
				few = c.fewer(q.ti, q.g)
			}
			counts[ReasonGPUs] += few
			matching += c.inView[q.ti] - few
			inRegion[c.key.region] += c.inView[q.ti] - few
			cheapest = leastOf(cheapest, c.leastAskOf(q.ti))
		}
	}
	if avoided, below := e.turnedAwayMatching(q, sig); avoided+below > 0 {
		counts[ReasonAvoided] += avoided
		counts[ReasonTrustLevel] += below
		matching -= avoided + below
		cheapest = 0 // it may be a node turned away's: say nothing of it
	}
	overCap := matching > 0 && cheapest > q.cap
	if overCap { // every node that matches asks more: the cap is why
		counts[ReasonPrice] += matching
	}
	for r, n := range counts {
		if n == 0 {
			delete(counts, r)
		}
	}
	if overCap {
		return fmt.Sprintf("no node fits: %s; the cheapest that matches asks %s/GPU-h now, above the cap %s/GPU-h",
			summarize(counts), cheapest, q.cap)
	}
	if matching == 0 {
		return "no node fits: " + summarize(counts)
	}
	if split := splitGang(q, inRegion); split != "" && counts[ReasonAvoided]+counts[ReasonTrustLevel] == 0 {
		return split
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no room now: of the %d %s its hardware and rules, ",
		matching, plural(matching, "node that matches", "nodes that match"))
	if q.n > 1 {
		fmt.Fprintf(&b, "no region has %d with %d free %s", q.n, q.g, plural(q.g, "GPU", "GPUs"))
	} else {
		fmt.Fprintf(&b, "none has %d free %s", q.g, plural(q.g, "GPU", "GPUs"))
	}
	if need := e.windowNeed(q.job); need < q.dur {
		fmt.Fprintf(&b, ", a window of at least %s", time.Duration(need)*time.Second)
	} else {
		fmt.Fprintf(&b, ", a window of %s", time.Duration(q.dur)*time.Second)
	}
	fmt.Fprintf(&b, " and an ask within the cap %s/GPU-h now", q.cap)
	if len(counts) > 0 {
		fmt.Fprintf(&b, " (other nodes: %s)", summarize(counts))
	}
	if q.job.Tier != idlegrid.TierBronze {
		b.WriteString(noPlanNote)
	}
	return b.String()
}

// turnedAwayMatching counts the nodes in q's tier view, of classes sig
// accepts, that q's job turns away (turnsAway): those whose provider it
// avoids, and the rest of them below its trust level; but for those the
// reason counts as too few GPUs. It reads the nodes of the classes sig
// accepts, and only jobs that avoid providers or ask a trust level ask,
// once until waitReason's cache is emptied.
func (e *Engine) turnedAwayMatching(q *query, sig *signature) (avoidedNodes, below int) {
	if len(q.job.AvoidProviders) == 0 && q.job.MinTrustLevel == 0 {
		return 0, 0
	}
	for _, c := range sig.all {
		if c.key.maxJob > 0 && c.key.maxJob < q.dur {
			continue
		}
		few := c.allUsable(q.job) // then a node with fewer GPUs is counted as too few already
		for _, nd := range c.order {
			if !nd.inView(q.ti) || (few && len(nd.gpus) < q.g) {
				continue
			}
			switch {
			case avoided(q, nd):
				avoidedNodes++
			case belowLevel(q, nd):
				below++
			}
		}
	}
	return avoidedNodes, below
}

// splitGang says why a gang can never be placed when no region has as
// many nodes that match it as it asks for: a gang runs in one region, so
// waiting for room does not help. "" for a one-node job, or a gang some
// region could hold.
func splitGang(q *query, inRegion map[string]int) string {
	if q.n <= 1 {
		return ""
	}
	var regions []string
	for r, n := range inRegion {
		if n >= q.n {
			return ""
		} else if n > 0 {
			regions = append(regions, fmt.Sprintf("%s %d", r, n))
		}
	}
	slices.Sort(regions)
	return fmt.Sprintf("no node fits: a gang runs in one region, and no region has %d nodes that match its hardware and rules "+
		"(%s); ask for fewer nodes, each with more GPUs, or for other GPU models", q.n, strings.Join(regions, ", "))
}

// heldForOthers says, for a one-node job that waits, when GPUs it could
// use are free now on a node that matches it but held for another job's
// reservation (EASY backfill lets a run that ends by its start take
// them): a renter who sees them free in the node list learns why, and
// what would fit. It says the reservation that starts first (then by
// job ID); "" when none holds such GPUs, or when more than maxHeldLooks
// reservations stand, too many to look through for every job that waits.
func (e *Engine) heldForOthers(q *query, sig *signature) string {
	if q.n != 1 || len(e.reservations) == 0 || len(e.reservations) > maxHeldLooks {
		return ""
	}
	var best *reservation
	var on *node
	for _, r := range e.reservations {
		if r.jobID == q.job.ID || best != nil && cmp.Or(cmp.Compare(r.start, best.start), strings.Compare(r.jobID, best.jobID)) >= 0 {
			continue
		}
		for _, nd := range r.nodes {
			if nd.cls != nil && sig.accepts[nd.cls.idx] && nd.until > q.now && freeNowFor(q.job, nd) >= q.g {
				best, on = r, nd
				break
			}
		}
	}
	switch {
	case best == nil:
		return ""
	case best.start <= q.now:
		return fmt.Sprintf("; GPUs free on %s now are held for another job, which starts there now", on.label())
	}
	return fmt.Sprintf("; GPUs free on %s now are held for another job's reservation from %s: a run that ends by then may take them",
		on.label(), timeOf(best.start).Format(time.RFC3339))
}

// maxHeldLooks is the most reservations heldForOthers looks through.
const maxHeldLooks = 64

// freeNowFor counts the GPUs of nd free now that job can use.
func freeNowFor(job *idlegrid.Job, nd *node) int {
	n := 0
	for i, h := range nd.held {
		if h == nil && usableBy(job, nd.gpus[i]) {
			n++
		}
	}
	return n
}

// holdingReason says what a job with a reservation waits for.
func holdingReason(r *reservation, start int64) string {
	what := "its reservation"
	if r.preempting {
		what = "the bronze leases it preempted to stop"
	}
	return fmt.Sprintf("waiting for %s: %s from %s", what, reservedList(r.nodes, r.gpus), timeOf(start).Format(time.RFC3339))
}

// reservedList says, for people, gpus[i] GPUs held on each of nodes.
func reservedList(nodes []*node, gpus []int) string {
	parts := make([]string, 0, len(nodes))
	for i, nd := range nodes {
		parts = append(parts, fmt.Sprintf("%d %s on %s", gpus[i], plural(gpus[i], "GPU", "GPUs"), nd.label()))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
