package market

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Explanation says why a job has not started and when it might.
type Explanation struct {
	JobID string `json:"job_id"`
	Nodes int    `json:"nodes"` // online nodes considered
	Fits  int    `json:"fits"`  // nodes that could take one share of the job now
	// Rejections counts the other nodes by the first constraint each fails,
	// in check order (see FirstMatcher), with ReasonReliability after VRAM.
	Rejections map[Reason]int `json:"rejections"`
	// Summary is what Place decides now, in words.
	Summary string `json:"summary"`
	// CheapestAsks are the best-scoring nodes that meet the job's hardware
	// and rules, whatever their price, window or load: the asks the job's
	// cap must reach, and what blocks each now.
	CheapestAsks []AskQuote   `json:"cheapest_asks"`
	Reservation  *Reservation `json:"reservation,omitempty"`
	// EstimatedStart is the earliest the job could start, from its
	// reservation, or the leases' time limits and the nodes' schedules;
	// the zero time when no node that matches would take it.
	EstimatedStart time.Time `json:"estimated_start,omitzero"`
	EstimateNote   string    `json:"estimate_note"`
	// Advice says what the renter could change in the job to start sooner.
	Advice []string `json:"advice,omitempty"`

	picks []Pick // what Place picks now, when it would place the job
}

// Picks are the nodes Place would place the job on now, or nil when it
// would not: what a caller needs to reckon the placement's escrow hold,
// which the engine does not weigh.
func (x *Explanation) Picks() []Pick { return x.picks }

// AskQuote is one node's ask as Explain shows it.
type AskQuote struct {
	NodeID              string          `json:"node_id"`
	NodeName            string          `json:"node_name"` // as its owner names it
	Region              string          `json:"region"`
	GPUModel            string          `json:"gpu_model"`
	AskMicrosPerGPUHour idlegrid.Micros `json:"ask_micros_per_gpu_hour"`
	Reliability         float64         `json:"reliability"`
	Score               float64         `json:"score"`
	Blocker             Reason          `json:"blocker,omitempty"` // "" when it could take the job now
}

// maxQuotes is how many asks Explain lists.
const maxQuotes = 5

// Explain checks every node against job, as Place would at now, and says
// why the job waits. It reads every node, so it is for people, not for the
// placement loop.
func (e *Engine) Explain(job *idlegrid.Job, now time.Time) Explanation {
	q := e.query(job, now)
	ex := Explanation{JobID: job.ID, Nodes: len(e.nodes), Rejections: map[Reason]int{}}
	var quotes bestQuotes
	var starts []nodeStart
	byClass := map[*class]Reason{} // what each class decides for all its nodes
	out := newRuledOut(e.cfg)
	for _, nd := range e.nodes {
		r := e.explainReason(&q, nd, byClass)
		if r == "" {
			ex.Fits++
		} else {
			ex.Rejections[r]++
			out.add(r, nd, job)
		}
		switch r {
		case "", ReasonWindow, ReasonPrice, ReasonCapacity:
			quotes.add(e, &q, nd, r)
			if withinCap(&q, nd) || len(nd.n.Ask.TimeOfDay) > 0 { // an ask over the cap now may fall under it later
				if t := e.estimateOn(&q, nd); t >= 0 {
					starts = append(starts, nodeStart{nd: nd, start: t})
				}
			}
		}
	}
	ex.CheapestAsks = quotes.top
	ex.Advice = advice(job, ex.Rejections)
	d := e.Place(job, now)
	ex.Reservation = d.Reservation
	switch {
	case d.Placed():
		ex.picks = d.Picks
		ex.Summary = fmt.Sprintf("it can start now on %s", pickList(d.Picks))
		ex.EstimatedStart, ex.EstimateNote = now, "it fits now; it starts at the next placement pass"
	case d.Reservation != nil:
		ex.Summary = d.Reason
		ex.EstimatedStart = d.Reservation.Start
		ex.EstimateNote = "when its reserved GPUs should be free"
	default:
		ex.Summary = d.Reason
		ahead := e.queueAhead(&q, starts)
		ex.EstimatedStart, ex.EstimateNote = e.estimate(&q, starts)
		if ahead > 0 && !ex.EstimatedStart.IsZero() {
			ex.EstimateNote += fmt.Sprintf(", after the %d queued %s ahead of it that could use the same nodes", ahead, plural(ahead, "job", "jobs"))
		}
		if job.Tier != idlegrid.TierGold && !ex.EstimatedStart.IsZero() {
			ex.EstimateNote += "; " + string(job.Tier) + " starts later if jobs of a higher tier come first"
		}
		if ex.EstimatedStart.IsZero() {
			ex.EstimateNote = neverNote(quotes.seen, quotes.withinCap)
		}
	}
	if !d.Placed() {
		ex.Advice = append(ex.Advice, out.advice(job, ex.Rejections)...)
	}
	if note := lateNote(job, ex.EstimatedStart); note != "" {
		ex.Advice = append(ex.Advice, note)
	}
	return ex
}

// lateNote warns when a job's estimated start is after the last start
// that finishes it by its deadline, when the scheduler cancels it.
func lateNote(job *idlegrid.Job, start time.Time) string {
	latest, ok := job.LatestStart()
	if !ok || start.IsZero() || !start.After(latest) {
		return ""
	}
	return fmt.Sprintf("the estimated start is after %s, the last start that finishes its run by its deadline; "+
		"unless a node takes it sooner it is cancelled then: a higher cap, a shorter run, fewer GPUs or a later deadline would help",
		latest.UTC().Format(time.RFC3339))
}

// advice says what in the job, besides its cap and hardware (which the
// estimate's note covers), keeps nodes from taking it.
func advice(job *idlegrid.Job, rejections map[Reason]int) []string {
	var out []string
	switch n := rejections[ReasonWindow]; {
	case n == 0 || job.Tier != idlegrid.TierBronze || resumes(job):
	case job.Nodes > 1:
		out = append(out, fmt.Sprintf("%d %s too short for its whole run, which a bronze gang needs: a stop counts its run from zero, "+
			"checkpoints or not; a one-node job that saves checkpoints may start in shorter windows", n, plural(n, "node's window is", "nodes' windows are")))
	default:
		out = append(out, fmt.Sprintf("%d %s too short for its whole run, which bronze that cannot resume needs; "+
			"if the job can resume from a checkpoint, say how often it saves one (checkpoint_every_seconds, or --checkpoint-every) "+
			"and it may start in shorter windows", n, plural(n, "node's window is", "nodes' windows are")))
	}
	return out
}

// estimate is when q.n of the nodes could start the job, in one region.
func (e *Engine) estimate(q *query, starts []nodeStart) (time.Time, string) {
	slices.SortFunc(starts, func(a, b nodeStart) int { return cmp.Compare(a.start, b.start) })
	count := map[string]int{}
	for _, c := range starts {
		if count[c.nd.n.Region]++; count[c.nd.n.Region] == q.n {
			return timeOf(c.start), fmt.Sprintf(
				"when, by the leases' time limits and the nodes' schedules and prices, %d matching %s in %s should have %d free %s, a long enough window and an ask within the cap",
				q.n, plural(q.n, "node", "nodes"), c.nd.n.Region, q.g, plural(q.g, "GPU", "GPUs"))
		}
	}
	return time.Time{}, ""
}

// nodeStart is the earliest a node could start a job being explained,
// unix nanos.
type nodeStart struct {
	nd    *node
	start int64
}

// maxAhead is how many of the jobs queued ahead of a job its estimate
// reckons with.
const maxAhead = 256

// queueAhead moves the starts of q's job later by the jobs queued ahead of
// it, in the scheduler's order (tier, then arrival): each in turn takes,
// for its duration, the node among starts it could use that is free soonest
// and cannot also hold q's job beside it. Those holding a reservation are
// counted already, on the nodes they reserved. Jobs that arrive later are not
// foreseen, though gold and silver go ahead of bronze when they come. It
// returns how many of the jobs ahead could use the nodes.
func (e *Engine) queueAhead(q *query, starts []nodeStart) int {
	if len(starts) == 0 {
		return 0
	}
	var ahead []*idlegrid.Job
	for _, j := range e.queued {
		// A job with a reservation is in starts already: its reserved
		// nodes free up only when it ends (estimateOn).
		// One that waits for money takes no node until its renter pays.
		if j.ID != q.job.ID && e.reservations[j.ID] == nil && queuedBefore(j, q.job) && !WaitsForMoney(j.Reason) {
			ahead = append(ahead, j)
		}
	}
	slices.SortFunc(ahead, func(a, b *idlegrid.Job) int {
		return cmp.Or(cmp.Compare(a.Tier.Rank(), b.Tier.Rank()), a.CreatedAt.Compare(b.CreatedAt), compareStrings(a.ID, b.ID))
	})
	// The soonest nodes decide the estimate; the rest keep their starts.
	slices.SortFunc(starts, func(a, b nodeStart) int { return cmp.Compare(a.start, b.start) })
	soonest := starts[:min(len(starts), maxAhead/4)]
	competing := 0
	for _, a := range ahead[:min(len(ahead), maxAhead)] {
		qa := e.query(a, timeOf(q.now))
		best := -1
		for i := range soonest {
			nd := soonest[i].nd
			if len(nd.gpus) >= max(a.GPUs, 1)+q.g || !e.couldUse(&qa, nd) {
				continue // room for both, or it cannot use nd
			}
			if best < 0 || soonest[i].start < soonest[best].start {
				best = i
			}
		}
		if best >= 0 {
			competing++
			soonest[best].start += max(a.DurationSeconds, 1) * int64(time.Second)
		}
	}
	return competing
}

// The reasons the scheduler gives a job that the engine would place but
// whose renter cannot pay for the placement: its available balance is
// short of the escrow hold, or a spend limit would be passed.
const (
	ReasonPrefixFunds      = "waiting for funds"
	ReasonPrefixSpendLimit = "waiting: spend limit "
)

// WaitsForMoney reports whether reason, a queued job's, says that it waits
// for money (ReasonPrefixFunds, ReasonPrefixSpendLimit). The engine does
// not weigh money, so its queue ahead leaves such jobs out, by the reason
// the scheduler gave them at its last pass.
func WaitsForMoney(reason string) bool {
	return strings.HasPrefix(reason, ReasonPrefixFunds) || strings.HasPrefix(reason, ReasonPrefixSpendLimit)
}

// queuedBefore reports whether the scheduler takes a before b.
func queuedBefore(a, b *idlegrid.Job) bool {
	if ra, rb := a.Tier.Rank(), b.Tier.Rank(); ra != rb {
		return ra < rb
	}
	return a.CreatedAt.Before(b.CreatedAt) || (a.CreatedAt.Equal(b.CreatedAt) && a.ID < b.ID)
}

// couldUse reports whether the job of qa meets nd's hardware, rules and
// ask, whatever nd's load and window now.
func (e *Engine) couldUse(qa *query, nd *node) bool {
	if e.staticReason(nd, qa.job) != "" {
		return false
	}
	switch e.nodeReason(qa, nd) {
	case "", ReasonWindow, ReasonCapacity:
		return withinCap(qa, nd) // a short window is judged before the ask
	}
	return false
}

// withinCap reports whether nd's ask now is within q's cap.
func withinCap(q *query, nd *node) bool { return nd.asks[q.ti] <= q.cap }

// neverNote says why no start can be estimated, and what to change, from
// the asks of the nodes that meet the job's hardware and rules: how many
// there are, and how many of those are within the cap.
func neverNote(quoted, withinCap int) string {
	switch {
	case quoted == 0:
		return "unknown: no online node meets its hardware and rules; relax those that rule out the most nodes"
	case withinCap == 0:
		return "unknown: every node that meets its hardware and rules asks more than the cap; raise the cap above the cheapest ask"
	}
	return "unknown: no node that matches and is within the cap will have room for it within the schedule horizon; ask for fewer GPUs or nodes, or a shorter run"
}

// explainReason is the first constraint nd fails for q's job now, or "",
// as staticReason then nodeReason say, with the class's part looked up in
// byClass once per class.
func (e *Engine) explainReason(q *query, nd *node, byClass map[*class]Reason) Reason {
	if nd.floors[q.job.Tier.Rank()] <= 0 {
		return ReasonTier
	}
	r, ok := byClass[nd.cls]
	if !ok {
		r = classStaticReason(nd.cls, q.job)
		byClass[nd.cls] = r
	}
	if r == "" {
		r = e.nodeStaticReason(nd, q.job)
	}
	if r == "" {
		r = e.nodeReason(q, nd)
	}
	return r
}

// bestQuotes keeps the maxQuotes best-scoring asks of the nodes that meet
// a job's hardware and rules, best first (ties by node ID), and counts
// them all: a market of 100,000 nodes quotes most of them.
type bestQuotes struct {
	top             []AskQuote
	seen, withinCap int
}

// add counts nd, which meets the job's hardware and rules and is blocked
// by r ("" when it could take the job now), and keeps its quote if it is
// among the best.
func (b *bestQuotes) add(e *Engine, q *query, nd *node, r Reason) {
	b.seen++
	if withinCap(q, nd) {
		b.withinCap++
	}
	ask := nd.asks[q.ti]
	score := scoreOf(ask, e.credit(q, nd), nd.rel, q.w)
	if len(b.top) == maxQuotes && compareQuote(score, nd.id, &b.top[maxQuotes-1]) >= 0 {
		return
	}
	a := AskQuote{
		NodeID: nd.id, NodeName: nd.n.Name, Region: nd.n.Region, GPUModel: modelOf(q.job, nd), AskMicrosPerGPUHour: ask,
		Reliability: nd.rel, Score: score, Blocker: r,
	}
	i, _ := slices.BinarySearchFunc(b.top, a, func(x, a AskQuote) int { return -compareQuote(a.Score, a.NodeID, &x) })
	if len(b.top) == maxQuotes {
		b.top = b.top[:maxQuotes-1]
	}
	b.top = slices.Insert(b.top, i, a)
}

// compareQuote orders a quote of score by nodeID against x: by score,
// then node ID.
func compareQuote(score float64, nodeID string, x *AskQuote) int {
	return cmp.Or(cmp.Compare(score, x.Score), compareStrings(nodeID, x.NodeID))
}

// maxPriceMoves is how many of a node's time-of-day price changes an
// estimate looks through for an ask within the cap.
const maxPriceMoves = 16

// estimateOn is the earliest time nd could start q: when enough GPUs free
// up, its window, open now or the next one, lasts what q needs, and its
// ask then, as its time-of-day prices have it, is within the cap; -1 when
// that is not known.
func (e *Engine) estimateOn(q *query, nd *node) int64 {
	t := e.earliest(q, nd, q.g)
	if t < 0 {
		return -1
	}
	if r := nd.res; r != nil && r.jobID != q.job.ID && e.available(q, nd) < q.g {
		t = max(t, r.end)
	}
	for range maxPriceMoves {
		if t = e.windowStart(q, nd, t); t < 0 || nd.askAt(q.ti, t) <= q.cap {
			return t
		}
		_, next := multiplierAt(nd.n.Ask.TimeOfDay, nd.loc, timeOf(t))
		if next.IsZero() {
			return -1
		}
		t = next.UnixNano()
	}
	return -1
}

// windowStart is the earliest time from t at which one of nd's windows,
// open now or opening within the schedule horizon, lasts what q needs; -1
// when none does. A window too short for q, or ending before t, is
// passed over for the next.
func (e *Engine) windowStart(q *query, nd *node, t int64) int64 {
	need := e.windowNeed(q.job) * int64(time.Second)
	open, until := q.now, nd.until
	if nd.until <= q.now {
		if open, until = nd.nextOpen, nd.nextSpanEnd(); open == 0 {
			return -1
		}
	}
	horizon := q.now + int64(idlegrid.WindowHorizon)
	for until > 0 {
		if s := max(t, open); until >= s+need {
			return s
		}
		if until >= horizon {
			return -1
		}
		open, until = e.spanAfter(nd, until)
		if open == 0 || open > horizon {
			return -1
		}
	}
	return -1
}

// nextSpanEnd is when the window opening at nd.nextOpen ends, read once
// a refresh (a schedule's spans are most of an explanation); -1 when it
// is not open then after all.
func (nd *node) nextSpanEnd() int64 {
	if nd.nextOpen != 0 && nd.nextUntil == 0 {
		nd.nextUntil = -1
		if u := nd.n.Schedule.AvailableUntil(timeOf(nd.nextOpen)); !u.IsZero() {
			nd.nextUntil = u.UnixNano()
		}
	}
	return nd.nextUntil
}

// modelOf names the GPU model of nd the job would use.
func modelOf(job *idlegrid.Job, nd *node) string {
	for _, g := range nd.gpus {
		if usableBy(job, g) {
			return g.Model
		}
	}
	return ""
}

func pickList(picks []Pick) string {
	s := ""
	for i, p := range picks {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s at %s/GPU-h", p.Node.ID, p.PriceMicrosPerGPUHour)
	}
	return s
}
