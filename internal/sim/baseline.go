package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// The baselines are what a market without idlegrid's engine would do with
// the same nodes and jobs. Each is a plain matcher, deliberately simple:
//
//	fifo        FIFO first-fit: jobs strictly in arrival order, whatever
//	            their tier; each goes to the first node, in the trace's
//	            order, that fits it; it pays that node's ask.
//	cheapest    cheapest-first: jobs by tier, then arrival; each goes to the
//	            node with the lowest ask, however unreliable; pays the ask.
//	pay-as-bid  market.FirstMatcher's rule: jobs by tier, then arrival; each
//	            goes to the node with the lowest ask ÷ reliability (its
//	            record); pays the ask.
//
// None has tiers with preemption, notice, reservations or second-score
// prices: a node fits a job when it is in an allowed model and region, its
// window lasts the job's whole run (bronze too), it has the GPUs free and
// its ask for the tier is within the cap — market.FirstMatcher's checks.
// They keep an index (classes of nodes of one model and region, each a
// tree over the nodes in order) so that a million jobs on 100,000 nodes
// take minutes; TestBaseline_matchesFirstMatcher checks that the index
// picks what a full scan by FirstMatcher picks.
type baseline struct {
	w     *world
	r     *replay
	order order

	classes []*bclass
	classOf map[[2]string]*bclass
	accepts map[[2]uint16][]*bclass // (model set, region) → classes
	cls     []*bclass               // per node
	pos     []int32                 // per node: its leaf in its class
	askNow  []idlegrid.Micros       // per node: the ask of its current window
}

var _ matcher = (*baseline)(nil)

// order is how a baseline ranks nodes.
type order int

const (
	orderFIFO order = iota
	orderCheapest
	orderPayAsBid
)

func (o order) name() string {
	return [...]string{RunFIFO, RunCheapest, RunPayAsBid}[o]
}

// bclass is the nodes of one model and region in the baseline's order,
// over a tree: each inner entry keeps the most free GPUs, the latest
// window end and the lowest ask below it, so that the first node that
// fits a job is found without visiting the rest.
type bclass struct {
	model, region string
	nodes         []int32 // in order
	size          int     // leaves, a power of two
	free          []int16
	until         []int64
	ask           []idlegrid.Micros
	dirty         bool // the order must be rebuilt
}

func newBaseline(w *world, o order) *baseline {
	return &baseline{w: w, order: o, classOf: map[[2]string]*bclass{}, accepts: map[[2]uint16][]*bclass{}}
}

func (b *baseline) byTier() bool       { return b.order != orderFIFO }
func (b *baseline) wantsWindows() bool { return true }

func (b *baseline) start(r *replay) {
	b.r = r
	n := len(b.w.nodes)
	b.cls, b.pos, b.askNow = make([]*bclass, n), make([]int32, n), make([]idlegrid.Micros, n)
	for i, sn := range b.w.nodes {
		k := [2]string{sn.model, sn.region}
		c := b.classOf[k]
		if c == nil {
			c = &bclass{model: sn.model, region: sn.region}
			b.classOf[k] = c
			b.classes = append(b.classes, c)
		}
		c.nodes = append(c.nodes, int32(i))
		b.cls[i] = c
		b.askNow[i] = sn.askAt(0)
	}
	for _, c := range b.classes {
		b.rebuild(c)
	}
}

// key orders two nodes of a class, best first.
func (b *baseline) compare(x, y int32) int {
	switch b.order {
	case orderCheapest:
		if c := cmp.Compare(b.askNow[x], b.askNow[y]); c != 0 {
			return c
		}
	case orderPayAsBid:
		sx := market.Score(b.askNow[x], b.r.nodes[x].reliability())
		sy := market.Score(b.askNow[y], b.r.nodes[y].reliability())
		if c := cmp.Compare(sx, sy); c != 0 {
			return c
		}
	default:
		return cmp.Compare(x, y)
	}
	return strings.Compare(b.w.nodes[x].id, b.w.nodes[y].id)
}

// rebuild sorts a class and builds its tree.
func (b *baseline) rebuild(c *bclass) {
	slices.SortFunc(c.nodes, b.compare)
	c.size = 1
	for c.size < len(c.nodes) {
		c.size *= 2
	}
	c.free, c.until, c.ask = make([]int16, 2*c.size), make([]int64, 2*c.size), make([]idlegrid.Micros, 2*c.size)
	for i := range c.ask {
		c.ask[i] = 1<<62 - 1
	}
	for p, i := range c.nodes {
		b.pos[i] = int32(p)
		b.setLeaf(c, int(i))
	}
	for k := c.size - 1; k >= 1; k-- {
		c.pull(k)
	}
	c.dirty = false
}

func (c *bclass) pull(k int) {
	c.free[k] = max(c.free[2*k], c.free[2*k+1])
	c.until[k] = max(c.until[2*k], c.until[2*k+1])
	c.ask[k] = min(c.ask[2*k], c.ask[2*k+1])
}

// setLeaf writes node i's leaf: its free GPUs and window end while a
// window is open (none while closed), and its ask.
func (b *baseline) setLeaf(c *bclass, i int) {
	ns := b.r.nodes[i]
	k := c.size + int(b.pos[i])
	c.free[k], c.until[k], c.ask[k] = 0, 0, b.askNow[i]
	if ns.open {
		c.free[k] = int16(ns.n.gpus - ns.used)
		c.until[k] = ns.n.windows[ns.win].end
	}
}

// update rewrites node i's leaf and the path above it.
func (b *baseline) update(i int) {
	c := b.cls[i]
	if c.dirty {
		return // the rebuild reads it
	}
	b.setLeaf(c, i)
	for k := (c.size + int(b.pos[i])) / 2; k >= 1; k /= 2 {
		c.pull(k)
	}
}

// first is the first node of c, in order, that has g free GPUs, a window
// open until need, and a floor for the tier within the cap; -1 if none.
func (c *bclass) first(k, g int, need int64, tier idlegrid.Tier, limit idlegrid.Micros) int {
	if int(c.free[k]) < g || c.until[k] < need || floorOf(c.ask[k], tier) > limit {
		return -1
	}
	if k >= c.size {
		return k - c.size
	}
	if i := c.first(2*k, g, need, tier, limit); i >= 0 {
		return i
	}
	return c.first(2*k+1, g, need, tier, limit)
}

// classesFor lists the classes a job accepts: its models (any when none)
// in its region (any when none).
func (b *baseline) classesFor(models, region uint16) []*bclass {
	k := [2]uint16{models, region}
	if cs, ok := b.accepts[k]; ok {
		return cs
	}
	var cs []*bclass
	ms, reg := b.w.modelSets[models], b.w.regions[region]
	for _, c := range b.classes {
		if (len(ms) == 0 || slices.ContainsFunc(ms, func(m string) bool { return strings.EqualFold(m, c.model) })) && (reg == "" || reg == c.region) {
			cs = append(cs, c)
		}
	}
	b.accepts[k] = cs
	return cs
}

func (b *baseline) place(j *liveJob, now int64) decision {
	spec := j.spec
	tier, g, need := spec.tierOf(), int(spec.gpus), now+j.remaining
	best := int32(-1)
	var bestFloor idlegrid.Micros
	cs := b.classesFor(spec.models, spec.region)
	for _, c := range cs {
		if c.dirty {
			b.rebuild(c)
		}
		p := c.first(1, g, need, tier, spec.cap)
		if p < 0 {
			continue
		}
		i := c.nodes[p]
		if best < 0 || b.better(i, best, tier) {
			best, bestFloor = i, floorOf(b.askNow[i], tier)
		}
	}
	if best < 0 {
		return decision{reason: b.whyNot(cs, j)}
	}
	return decision{picks: []pick{{node: best, n: g, price: bestFloor}}}
}

// better reports whether node x beats node y for a job of tier.
func (b *baseline) better(x, y int32, tier idlegrid.Tier) bool {
	switch b.order {
	case orderFIFO:
		return x < y
	case orderCheapest:
		fx, fy := floorOf(b.askNow[x], tier), floorOf(b.askNow[y], tier)
		if fx != fy {
			return fx < fy
		}
	default:
		sx := market.Score(floorOf(b.askNow[x], tier), b.r.nodes[x].reliability())
		sy := market.Score(floorOf(b.askNow[y], tier), b.r.nodes[y].reliability())
		if sx != sy {
			return sx < sy
		}
	}
	return b.w.nodes[x].id < b.w.nodes[y].id
}

// whyNot says why no node takes the job, in the engine's words so that
// reasons count alike.
func (b *baseline) whyNot(cs []*bclass, j *liveJob) string {
	if len(cs) == 0 {
		return fmt.Sprintf("no node fits: %d gpu model", len(b.w.nodes))
	}
	cheap := false
	for _, c := range cs {
		cheap = cheap || floorOf(c.ask[1], j.spec.tierOf()) <= j.spec.cap
	}
	if !cheap {
		return "no node fits: cap below ask"
	}
	return "no room now: no node that matches has the GPUs free in a window that lasts the run"
}

func (b *baseline) commit(*liveJob, *decision, int64) {}
func (b *baseline) leaseStarted(l *lease)             { b.update(int(l.node.n.idx)) }
func (b *baseline) leaseNoticed(*lease)               {}
func (b *baseline) leaseEnded(l *lease)               { b.update(int(l.node.n.idx)) }
func (b *baseline) checkpoint(*lease, int64)          {}
func (b *baseline) queued(*liveJob)                   {}
func (b *baseline) forget(*liveJob)                   {}
func (b *baseline) advance(int64) []notice            { return nil }
func (b *baseline) nextEvent() int64                  { return 0 }
func (b *baseline) republish(int64)                   {}

func (b *baseline) windowOpened(ns *nodeState, w int) {
	i := int(ns.n.idx)
	if a := ns.n.askAt(w); a != b.askNow[i] {
		b.askNow[i] = a
		if b.order != orderFIFO {
			b.cls[i].dirty = true
		}
	}
	b.update(i)
}

func (b *baseline) windowClosed(ns *nodeState) { b.update(int(ns.n.idx)) }

// recordsChanged re-ranks pay-as-bid's classes, whose order is by record.
func (b *baseline) recordsChanged(ns []*nodeState) {
	if b.order != orderPayAsBid {
		return
	}
	for _, s := range ns {
		b.cls[s.n.idx].dirty = true
	}
}
