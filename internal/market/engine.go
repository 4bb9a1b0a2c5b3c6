package market

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/minheap"
)

// Config tunes the Engine. Zero fields take the defaults.
type Config struct {
	// GoldMinReliability is the reliability a node needs to run gold jobs.
	// Default 0.9.
	GoldMinReliability float64
	// GoldMinLevel is the trust level (idlegrid.Node.Level) a node needs
	// to run gold jobs; the trust policy sets it. Default 0: no bar.
	GoldMinLevel int
	// NoticeSeconds is how long a bronze lease runs after it is given notice
	// before it is stopped. Default 120.
	NoticeSeconds int64
	// MinRuntimeSeconds protects young bronze leases: a lease that has run
	// less than this is not preempted. Default 300.
	MinRuntimeSeconds int64
	// TransferCostMicrosPerGB is what moving one GB of a job's data to a
	// node is assumed to cost; a node that caches the data earns it back as
	// a credit in its score. Default 10,000 ($0.01 per GB).
	TransferCostMicrosPerGB idlegrid.Micros
}

// Defaults of Config.
const (
	DefaultGoldMinReliability      = 0.9
	DefaultNoticeSeconds           = 120
	DefaultMinRuntimeSeconds       = 300
	DefaultTransferCostMicrosPerGB = idlegrid.Micros(10_000)
)

func (c Config) withDefaults() Config {
	if c.GoldMinReliability == 0 {
		c.GoldMinReliability = DefaultGoldMinReliability
	}
	if c.NoticeSeconds == 0 {
		c.NoticeSeconds = DefaultNoticeSeconds
	}
	if c.MinRuntimeSeconds == 0 {
		c.MinRuntimeSeconds = DefaultMinRuntimeSeconds
	}
	if c.TransferCostMicrosPerGB == 0 {
		c.TransferCostMicrosPerGB = DefaultTransferCostMicrosPerGB
	}
	return c
}

// Engine is the market: the online nodes, the GPUs live leases hold, the
// reservations and notices in progress, and recent clearing prices,
// indexed so that placing a job costs about the same at 100,000 nodes as
// at 100. It is not safe for concurrent use: one goroutine, the
// coordinator's scheduler, owns it and feeds it events (see the package
// doc). Its clock is the time of the last Advance.
type Engine struct {
	cfg     Config
	now     time.Time
	nowNano int64

	nodes      map[string]*node
	classByKey map[classKey]*class
	classes    []*class
	classGen   uint64
	memberGen  uint64 // bumps whenever a node joins or leaves a class
	askGen     uint64 // bumps whenever a time-of-day multiplier moves a node's asks
	levelGen   uint64 // bumps whenever a node's trust level changes in place (restand)
	subGen     uint64 // bumps whenever a sub-shelf appears or goes
	sigs       map[sigKey]*signature
	cachedBy   map[string][]*class // dataset → classes with a sub-shelf for it

	leases       map[string]*hold
	claims       map[claimKey]*hold
	orphans      map[string]map[string]*hold // node ID → leases on a node that is not online
	checkpoints  map[string]int64            // lease ID → last checkpoint, kept while the lease lives
	reservations map[string]*reservation     // by job ID
	queued       map[string]*idlegrid.Job

	events minheap.Heap[event]
	seq    uint64
	locs   map[string]*time.Location
	market map[cellKey]*cell

	dirty    []*shelf // shelves to clean at the next Advance
	holdPool []*hold  // released holds, for reuse

	// eligible is the bronze leases younger than the minimum runtime at
	// eligibleAt, by when they will not be; see processEligible.
	eligible   []eligibleLease
	eligibleAt int64
	// eligibleGen counts the bronze leases that passed the minimum
	// runtime, for reservations made before they did (preemptSooner).
	eligibleGen uint64

	// Scratch for one search; the engine has one owner.
	mark   uint64
	top    topK
	bounds []classBound
	// gangBounds holds the shelves gangRegions bounded, region by region.
	gangBounds []classBound
	gang       gangScratch
	picks      []Pick // the slab newPicks cuts decisions' picks from
	// planScratch and planOrder are what planShelves answers in.
	planScratch [2][]*shelf
	planOrder   [][]*shelf
	holdScratch []*hold // earliest's copy of a node's holds
	bf          []bfItem
	// rankScratch is what ranked lists reuse when they follow the shelf
	// (ranked.go).
	rankScratch rankScratch
	rankMark    uint64 // counts reranks, to mark the nodes each found
	// placed remembers the nodes of the last decision Place made, so that
	// its Commit finds them without looking their IDs up.
	placed []*node
	// touched is where touchShelves leaves what it read.
	touched uint64
	// schedIDs and spans are the windows Explain read, by schedule
	// (spans.go); schedGen bumps when they are forgotten.
	schedIDs map[string]uint32
	spans    map[spanKey]span
	schedGen uint32
}

// claimKey names a claim: one job's GPUs on one node.
type claimKey struct{ jobID, nodeID string }

// NewEngine returns an empty engine. Call Advance with the current time
// before adding nodes, so that their windows and prices are read at it.
func NewEngine(cfg Config) *Engine {
	return &Engine{
		cfg:          cfg.withDefaults(),
		nodes:        map[string]*node{},
		classByKey:   map[classKey]*class{},
		sigs:         map[sigKey]*signature{},
		cachedBy:     map[string][]*class{},
		leases:       map[string]*hold{},
		claims:       map[claimKey]*hold{},
		orphans:      map[string]map[string]*hold{},
		checkpoints:  map[string]int64{},
		reservations: map[string]*reservation{},
		queued:       map[string]*idlegrid.Job{},
		locs:         map[string]*time.Location{},
		market:       map[cellKey]*cell{},
	}
}

// Config returns the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// UpsertNode adds an online node, or takes its new offer or record. Its
// window and time-of-day price are read at the engine's clock. A node that
// is not online is removed.
func (e *Engine) UpsertNode(n *idlegrid.Node) {
	if n == nil {
		return
	}
	if n.State != "" && n.State != idlegrid.NodeOnline {
		e.RemoveNode(n.ID)
		return
	}
	nd := e.nodes[n.ID]
	if nd != nil && e.restandOnly(nd, n) {
		e.restand(nd, n) // a new reputation: it moves along its shelves (restand.go)
		return
	}
	var old map[string]*hold
	if nd == nil {
		nd = &node{id: n.ID}
		nd.holds, nd.sums = nd.holdsBuf[:0], nd.sumsBuf[:0]
		nd.shelves, nd.pos = nd.shelvesBuf[:0], nd.posBuf[:0]
		e.nodes[n.ID] = nd
	} else {
		e.unindex(nd)
		for i, h := range nd.held {
			if h != nil {
				if old == nil {
					old = map[string]*hold{}
				}
				old[nd.gpus[i].UUID] = h
			}
		}
	}
	nd.n = n
	nd.provider, nd.offer = n.ProviderID, n.Offer.Clone() // what restandOnly compares
	nd.ver++
	// A new slice, never changed after: picks share it (pickGPUs).
	nd.gpus = slices.Clone(n.GPUs)
	slices.SortFunc(nd.gpus, func(a, b idlegrid.GPU) int { return compareStrings(a.UUID, b.UUID) })
	if len(nd.gpus) <= inlineSlots {
		nd.held = nd.heldBuf[:len(nd.gpus)]
	} else {
		nd.held = make([]*hold, len(nd.gpus))
	}
	for i := range nd.gpus {
		nd.held[i] = old[nd.gpus[i].UUID]
	}
	for _, h := range nd.holds {
		h.gpus = 0
		for _, x := range nd.held {
			if x == h {
				h.gpus++
			}
		}
	}
	gone := e.takeGone(nd, old)
	nd.resumAll()
	nd.rel = clampReliability(n.Reliability)
	nd.cpu, nd.ram = int32(min(max(n.CPUCores, math.MinInt32), math.MaxInt32)), int32(min(max(n.RAMMB, math.MinInt32), math.MaxInt32))
	for t, tier := range idlegrid.Tiers {
		nd.floors[t], _ = n.Ask.Floor(tier)
	}
	nd.views = viewsOf(nd, e.cfg)
	nd.loc = e.location(n.Schedule.TimeZone)
	nd.datasets = slices.Compact(slices.Sorted(slices.Values(n.CachedDatasets)))
	nd.cached = len(nd.datasets) > 0
	nd.cell = nil
	nd.pct, nd.until, nd.nextOpen, nd.nextUntil, nd.schedID = 0, 0, 0, 0, 0
	nd.setPrices(100)
	key, types := e.keyOf(nd)
	c := e.classFor(key, types)
	e.addToClass(c, nd)
	for _, ds := range nd.datasets {
		if !slices.Contains(e.cachedBy[ds], c) {
			e.cachedBy[ds] = append(e.cachedBy[ds], c)
		}
	}
	waiting := e.orphans[nd.id]
	delete(e.orphans, nd.id)
	for _, h := range waiting {
		if e.attach(h, nd, h.uuids); h.gpus == 0 {
			h.nd = nil // none of its GPUs is back: it waits on
			e.orphan(nd.id, h)
			continue
		}
		h.uuids = nil
	}
	for _, h := range gone {
		e.orphan(nd.id, h)
	}
	nd.leaf, nd.leafPlan = e.entries(nd) // its shelves are dirty: the rebuild writes it
	e.refresh(nd)
	if nd.until == 0 && !e.now.IsZero() { // closed now: refresh, after the reset above, saw no change
		for _, h := range nd.holds {
			e.scheduleNotice(nd, h)
		}
	}
}

// takeGone takes off nd the holds that kept none of its GPUs when it was
// upserted with others (old: the holds by the UUIDs they had). A claim is
// released; a lease's hold is returned, with its UUIDs, to wait as an
// orphan, as a removed node's do, for a GPU it had to come back.
func (e *Engine) takeGone(nd *node, old map[string]*hold) []*hold {
	var gone []*hold
	for _, h := range slices.Clone(nd.holds) {
		if h.gpus > 0 {
			continue
		}
		nd.dropHold(h)
		h.nd, h.uuids = nil, h.uuids[:0]
		for u, x := range old {
			if x == h {
				h.uuids = append(h.uuids, u)
			}
		}
		slices.Sort(h.uuids)
		if h.leaseID == "" {
			delete(e.claims, claimKey{h.jobID, nd.id})
			e.releaseHold(h)
			continue
		}
		gone = append(gone, h)
	}
	return gone
}

// orphan keeps h, a lease's hold on none of node's GPUs, until the node
// has one of h.uuids again.
func (e *Engine) orphan(nodeID string, h *hold) {
	if e.orphans[nodeID] == nil {
		e.orphans[nodeID] = map[string]*hold{}
	}
	e.orphans[nodeID][h.leaseID] = h
}

// RemoveNode forgets a node that went offline or was lost. Its leases stay
// known until RemoveLease; a reservation on it is dropped, and its job
// plans anew at its next Place.
func (e *Engine) RemoveNode(nodeID string) {
	nd := e.nodes[nodeID]
	if nd == nil {
		return
	}
	if nd.res != nil {
		e.dropReservation(nd.res.jobID)
	}
	e.unindex(nd)
	for _, h := range nd.holds {
		h.uuids = h.uuids[:0]
		for i, x := range nd.held {
			if x == h {
				h.uuids = append(h.uuids, nd.gpus[i].UUID)
			}
		}
		h.gpus = 0
		h.nd = nil
		if h.leaseID == "" {
			delete(e.claims, claimKey{h.jobID, nodeID})
			e.releaseHold(h)
			continue
		}
		e.orphan(nodeID, h)
	}
	clear(nd.holds)
	nd.holds, nd.sums = nd.holds[:0], nd.sums[:0]
	clear(nd.held)
	nd.ver++
	delete(e.nodes, nodeID)
}

// unindex takes a node out of its class and the dataset index.
func (e *Engine) unindex(nd *node) {
	c := nd.cls
	if c == nil {
		return
	}
	e.memberGen++
	c.remove(nd)
	for _, ds := range nd.datasets {
		if c.cached[ds] == nil {
			e.cachedBy[ds] = slices.DeleteFunc(e.cachedBy[ds], func(x *class) bool { return x == c })
			if len(e.cachedBy[ds]) == 0 {
				delete(e.cachedBy, ds)
			}
		}
	}
	if c.count == 0 {
		e.dropClass(c)
	}
}

// AddLease records that a live lease (assigned or running) holds GPUs, or
// takes its new state: started, given notice. The lease replaces the claim
// its job's Commit left on those GPUs. A lease on a node that is not
// online is kept until the node comes back or the lease is removed.
func (e *Engine) AddLease(l *idlegrid.Lease) {
	if l == nil || l.State.Terminal() {
		return
	}
	prev := e.leases[l.ID]
	if prev != nil {
		e.detach(prev)
		if m := e.orphans[prev.nodeID]; m != nil {
			delete(m, prev.leaseID)
		}
	}
	h := e.newHold()
	h.leaseID, h.jobID, h.nodeID, h.bronze = l.ID, l.JobID, l.NodeID, l.Tier == idlegrid.TierBronze
	h.start = l.CreatedAt.UnixNano()
	if l.StartedAt != nil {
		h.start = l.StartedAt.UnixNano()
	}
	h.end = h.start + l.LimitSeconds*int64(time.Second)
	h.due = h.end
	if !l.CreatedAt.IsZero() {
		h.due = min(h.end, l.CreatedAt.UnixNano()+l.LimitSeconds*int64(time.Second))
	}
	if len(e.checkpoints) > 0 {
		h.checkpoint = e.checkpoints[l.ID]
	}
	if l.CheckpointAt != nil { // the store's, which outlives this engine
		h.checkpoint = max(h.checkpoint, l.CheckpointAt.UnixNano())
	}
	if l.NoticeAt != nil {
		notice := l.NoticeSeconds
		if notice == 0 {
			notice = e.cfg.NoticeSeconds
		}
		h.noticed, h.noticeAt = true, l.NoticeAt.UnixNano()
		h.stopAt = h.noticeAt + notice*int64(time.Second)
	} else if prev != nil && prev.noticed { // the engine gave notice before the store recorded it
		h.noticed, h.noticeAt, h.stopAt = true, prev.noticeAt, prev.stopAt
	}
	// The lease most often replaces its job's claim: find the node by it.
	c := e.claims[claimKey{l.JobID, l.NodeID}]
	h.join(gangOf(prev, c))
	if prev != nil {
		e.releaseHold(prev)
	}
	e.leases[l.ID] = h
	var nd *node
	if c != nil && c.nd != nil {
		nd = c.nd
	} else {
		c, nd = nil, e.nodes[l.NodeID]
	}
	if nd == nil {
		e.watchEligible(h)
		h.uuids = slices.Clone(l.GPUUUIDs)
		e.orphan(l.NodeID, h)
		return
	}
	var claimed hold
	if c != nil {
		claimed = *c
	}
	if e.attach(h, nd, l.GPUUUIDs); h.gpus == 0 && len(l.GPUUUIDs) > 0 {
		h.nd, h.uuids = nil, slices.Clone(l.GPUUUIDs) // none of its GPUs is the node's now: it waits for them
		e.orphan(l.NodeID, h)
		if key := (claimKey{l.JobID, l.NodeID}); c != nil && e.claims[key] == c { // the lease replaces its job's claim
			e.detach(c)
			delete(e.claims, key)
			e.releaseHold(c)
		}
		e.watchEligible(h)
		return
	}
	if !e.replaces(h, c, &claimed) {
		e.touch(nd)
	}
	e.scheduleNotice(nd, h)
	e.watchEligible(h)
}

// gangOf is the gang a lease's new hold joins: its previous hold's, or
// the claim's it replaces.
func gangOf(prev, claim *hold) *gang {
	if prev != nil {
		return prev.gang
	}
	if claim != nil {
		return claim.gang
	}
	return nil
}

// AddLeases adds leases as AddLease does, and makes the leases of one
// placement (job and attempt) of a job on several nodes a gang, as Commit
// made them when it placed the job: a new engine loads the store's live
// leases with it.
func (e *Engine) AddLeases(ls []*idlegrid.Lease) {
	type placement struct {
		job     string
		attempt int
	}
	gangs := map[placement][]*hold{}
	for _, l := range ls {
		e.AddLease(l)
		if h := e.leases[l.ID]; h != nil && h.gang == nil {
			k := placement{l.JobID, l.Attempt}
			gangs[k] = append(gangs[k], h)
		}
	}
	for _, holds := range gangs {
		if len(holds) < 2 {
			continue
		}
		link(holds)
		for _, h := range holds { // a gang restarts from zero: its index entries' loss bounds read its start
			if h.nd != nil && h.checkpoint > h.start {
				h.nd.resum(h)
				e.touch(h.nd)
			}
		}
	}
}

// replaces reports whether lease h, just attached, took exactly the GPUs
// of claim c (claimed is c as it was before), and changes none of its
// node's index entries: the same end, and bronze alike, and not yet
// preemptible.
func (e *Engine) replaces(h, c, claimed *hold) bool {
	return c != nil && c.gen != claimed.gen && // attach released it: h took all its GPUs
		h.gpus == claimed.gpus && h.bronze == claimed.bronze && !h.noticed && h.freeBy() == claimed.end &&
		(!h.bronze || h.start > e.eligibleAt-e.cfg.MinRuntimeSeconds*int64(time.Second))
}

// RemoveLease forgets a lease that ended, freeing its GPUs.
func (e *Engine) RemoveLease(leaseID string) {
	h := e.leases[leaseID]
	if h == nil {
		return
	}
	delete(e.leases, leaseID)
	if len(e.checkpoints) > 0 {
		delete(e.checkpoints, leaseID)
	}
	if h.nd == nil { // only a lease on an offline node is an orphan
		if m := e.orphans[h.nodeID]; m != nil {
			delete(m, leaseID)
			if len(m) == 0 {
				delete(e.orphans, h.nodeID)
			}
		}
	}
	e.detach(h)
	e.releaseHold(h)
}

// Checkpoint records that a lease saved its work at at, so that a
// preemption would lose only what ran since.
func (e *Engine) Checkpoint(leaseID string, at time.Time) {
	h := e.leases[leaseID]
	if h == nil {
		return
	}
	h.checkpoint = max(h.checkpoint, at.UnixNano())
	e.checkpoints[leaseID] = h.checkpoint
	if h.nd != nil {
		h.nd.resum(h)
		e.touch(h.nd)
	}
}

// NoteQueued records that a job waits in the queue, for the market view's
// demand. Placing it (Commit) or ForgetJob ends that.
func (e *Engine) NoteQueued(job *idlegrid.Job) {
	if job != nil {
		e.queued[job.ID] = job
	}
}

// ForgetJob drops everything the engine holds for a job that left the
// queue without a placement being stored (cancelled, deadline passed, or
// the store refused the placement): its reservation, its claims and its
// place in the demand.
func (e *Engine) ForgetJob(jobID string) {
	e.dropReservation(jobID)
	delete(e.queued, jobID)
	for k, h := range e.claims {
		if k.jobID == jobID {
			e.detach(h)
			delete(e.claims, k)
			e.releaseHold(h)
		}
	}
}

// EndBy is when the lease leaseID must have ended, and why: the close of
// its node's window, when it is open now (a node closed now, drained say,
// lets its gold and silver run on), or for gold and silver, the start of
// another job's reservation of the node that needs the lease's GPUs (see
// resNeeds; bronze is given notice then). ok is false when neither
// follows, or the engine does not hold the lease on an online node. The
// coordinator asks it of a lease its node has not started by its Pick's
// StartBy: started later, it would run into what follows.
func (e *Engine) EndBy(leaseID string) (at time.Time, why string, ok bool) {
	h := e.leases[leaseID]
	if h == nil || h.nd == nil {
		return time.Time{}, "", false
	}
	nd := h.nd
	end := int64(always)
	if nd.until != always && nd.until != 0 {
		end, why = nd.until, "the close of the node's window"
	}
	if nd.resNeeds(h) && nd.res.start < end {
		end, why = nd.res.start, "the start of another job's reservation of the node"
	}
	if end == always {
		return time.Time{}, "", false
	}
	return timeOf(end), why, true
}

// attach puts h on the node's slots of the GPUs uuids, taking them from
// any other hold: the store, which refuses to assign a GPU twice, is the
// truth.
func (e *Engine) attach(h *hold, nd *node, uuids []string) {
	h.nd, h.gpus = nd, 0
	for _, u := range uuids {
		i := nd.slot(u)
		if i < 0 {
			continue
		}
		if o := nd.held[i]; o != nil && o != h {
			o.gpus--
			if o.gpus > 0 {
				nd.resum(o)
			} else {
				nd.dropHold(o)
				if o.leaseID == "" {
					delete(e.claims, claimKey{o.jobID, nd.id})
					e.releaseHold(o)
				}
			}
		}
		if nd.held[i] != h {
			nd.held[i] = h
			h.gpus++
		}
	}
	switch {
	case h.gpus == 0:
	case slices.Contains(nd.holds, h):
		nd.resum(h)
	default:
		nd.addHold(h)
	}
}

// detach frees h's GPUs.
func (e *Engine) detach(h *hold) {
	nd := h.nd
	if nd == nil {
		return
	}
	for i, x := range nd.held {
		if x == h {
			nd.held[i] = nil
		}
	}
	nd.dropHold(h)
	h.nd, h.gpus = nil, 0
	e.touch(nd)
}

// newHold returns a blank hold, reusing a released one when it can.
func (e *Engine) newHold() *hold {
	if n := len(e.holdPool); n > 0 {
		h := e.holdPool[n-1]
		e.holdPool = e.holdPool[:n-1]
		return h
	}
	return &hold{}
}

// releaseHold takes back a hold nothing refers to any more, but events
// that check its gen.
func (e *Engine) releaseHold(h *hold) {
	h.join(nil)
	*h = hold{gen: h.gen + 1, uuids: h.uuids[:0]}
	e.holdPool = append(e.holdPool, h)
}

// touch recounts the node's GPUs, and tells its shelves that its free
// GPUs, window, holds or reservation changed.
func (e *Engine) touch(nd *node) {
	a, p := e.entries(nd)
	if len(nd.shelves) == 0 {
		return
	}
	if a == nd.leaf && p == nd.leafPlan {
		return // no shelf's entry for it changes (a rebuild reads the node afresh)
	}
	oldA, oldP := nd.leaf, nd.leafPlan
	nd.leaf, nd.leafPlan = a, p
	for i, s := range nd.shelves {
		s.update(nd, int(nd.pos[i]), oldA, a, oldP, p)
	}
}

// reorder tells the node's shelves that its score changed.
func (e *Engine) reorder(nd *node) {
	for _, s := range nd.shelves {
		s.markDirty()
	}
}

func (e *Engine) location(tz string) *time.Location {
	if tz == "" {
		return time.UTC
	}
	if l, ok := e.locs[tz]; ok {
		return l
	}
	l, err := time.LoadLocation(tz)
	if err != nil {
		l = time.UTC
	}
	e.locs[tz] = l
	return l
}

// Notice tells the coordinator to give a bronze lease notice now: it will
// be stopped at StopAt, NoticeSeconds from now or at the end of its node's
// window if that is later. Store NoticeAt and NoticeSeconds in the lease.
type Notice struct {
	LeaseID       string    `json:"lease_id"`
	JobID         string    `json:"job_id"`
	NodeID        string    `json:"node_id"`
	NoticeSeconds int64     `json:"notice_seconds"`
	NoticeAt      time.Time `json:"notice_at"`
	StopAt        time.Time `json:"stop_at"`
	Reason        string    `json:"reason"`
}

// Advance moves the engine's clock to now (never back): windows that
// opened or closed and time-of-day prices that changed take effect, and it
// returns the bronze leases that must be given notice now because their
// node's window ends within the notice period, by stop time. The engine
// records those notices itself.
func (e *Engine) Advance(now time.Time) []Notice {
	if now.Before(e.now) {
		now = e.now
	}
	e.now, e.nowNano = now, now.UnixNano()
	e.processEligible(e.nowNano)
	var out []Notice
	for len(e.events) > 0 && e.events[0].at <= e.nowNano {
		ev := e.events.Pop()
		switch {
		case ev.h != nil:
			if n, ok := e.windowNotice(ev); ok {
				out = append(out, n)
			}
		case e.nodes[ev.nd.id] == ev.nd && ev.nd.ver == ev.ver:
			e.refresh(ev.nd)
		}
	}
	e.cleanShelves()
	slices.SortFunc(out, func(a, b Notice) int {
		if c := a.StopAt.Compare(b.StopAt); c != 0 {
			return c
		}
		return compareStrings(a.LeaseID, b.LeaseID)
	})
	return out
}

// cleanShelves applies the index changes waiting since the last Advance
// (nodes added or removed, prices reordered), so that Place seldom finds a
// shelf to rebuild.
func (e *Engine) cleanShelves() {
	for _, s := range e.dirty {
		s.clean()
	}
	clear(e.dirty)
	e.dirty = e.dirty[:0]
}

// NextEvent is when the engine next has something to do at an Advance: a
// window opens or closes, a time-of-day price changes, or a bronze lease
// is due notice. The coordinator can sleep until then instead of polling;
// the zero time means nothing is pending.
func (e *Engine) NextEvent() time.Time {
	if len(e.events) == 0 {
		return time.Time{}
	}
	return time.Unix(0, e.events[0].at).UTC()
}

// refresh reads a node's window and time-of-day price at the engine's
// clock, and schedules the next time either may change.
func (e *Engine) refresh(nd *node) {
	if e.now.IsZero() {
		e.push(event{at: 0, nd: nd, ver: nd.ver}) // read at the first Advance
		return
	}
	now := e.now
	sched := &nd.n.Schedule
	until, next, nextOpen := int64(0), int64(0), int64(0)
	if sched.Mode == idlegrid.ScheduleAlways {
		until = always
	} else if u := sched.AvailableUntil(now); u.After(now) {
		until, next = u.UnixNano(), u.UnixNano()
		if !u.Before(now.Add(idlegrid.WindowHorizon)) {
			// The span runs to the horizon: read it on, a horizon past it,
			// so that until it is read again, half a horizon later, a job
			// of any length (at most the horizon) sees its true end.
			until = sched.AvailableUntil(u.Add(-1)).UnixNano()
			next = now.Add(idlegrid.WindowHorizon / 2).UnixNano()
		}
	} else if o := sched.NextOpening(now); !o.IsZero() {
		next, nextOpen = o.UnixNano(), o.UnixNano()
	} else {
		next = now.Add(idlegrid.WindowHorizon / 2).UnixNano()
	}
	pct, change := multiplierAt(nd.n.Ask.TimeOfDay, nd.loc, now)
	if !change.IsZero() && (next == 0 || change.UnixNano() < next) {
		next = change.UnixNano()
	}
	if next != 0 {
		e.push(event{at: next, nd: nd, ver: nd.ver})
	}
	nd.nextOpen, nd.nextUntil = nextOpen, 0
	if pct != nd.pct {
		nd.setPrices(pct)
		e.reorder(nd)
		e.askGen++
	}
	if until != nd.until {
		nd.until = until
		e.touch(nd)
		for _, h := range nd.holds {
			e.scheduleNotice(nd, h)
		}
	}
}

// scheduleNotice arranges for a bronze lease that would outlive its node's
// window to be given notice NoticeSeconds before the window ends, or at
// once when the node is closed now (its owner closed it, or it is
// drained): the notice period is guaranteed either way.
func (e *Engine) scheduleNotice(nd *node, h *hold) {
	if h.leaseID == "" || !h.bronze || h.noticed || !e.outlives(nd, h) {
		return
	}
	at := nd.until - e.cfg.NoticeSeconds*int64(time.Second)
	if nd.until == 0 {
		at = e.nowNano
	}
	e.push(event{at: at, nd: nd, h: h, hgen: h.gen, until: nd.until})
}

// outlives reports whether lease h would run past its node's window: by
// the end its placement promised (h.due, created + time limit), so that
// a lease placed to fit its window is not stopped, its whole run lost,
// for the delay between its placement and its start (an image pull, say);
// it runs past the window's end by that delay at most. On a node closed
// now, a lease whose promised end has passed is in that delay, and ends
// on its own.
func (e *Engine) outlives(nd *node, h *hold) bool {
	if nd.until == 0 {
		return h.due > e.nowNano
	}
	return nd.until != always && h.due > nd.until
}

// windowNotice gives a bronze lease notice because its window ends, if
// that is still so.
func (e *Engine) windowNotice(ev event) (Notice, bool) {
	h, nd := ev.h, ev.nd
	if h.gen != ev.hgen || e.leases[h.leaseID] != h || h.nd != nd || h.noticed || nd.until != ev.until || !e.outlives(nd, h) {
		return Notice{}, false
	}
	e.giveNotice(h, e.nowNano, max(nd.until, e.nowNano+e.cfg.NoticeSeconds*int64(time.Second)))
	reason := fmt.Sprintf("the window of node %s ends at %s", nd.id, timeOf(nd.until).Format(time.RFC3339))
	if nd.until == 0 {
		reason = fmt.Sprintf("node %s is not offered now: its window was closed", nd.id)
	}
	return Notice{
		LeaseID: h.leaseID, JobID: h.jobID, NodeID: nd.id, NoticeSeconds: e.cfg.NoticeSeconds,
		NoticeAt: e.now, StopAt: timeOf(h.stopAt), Reason: reason,
	}, true
}

// giveNotice records that h was given notice at at and stops at stopAt.
func (e *Engine) giveNotice(h *hold, at, stopAt int64) {
	h.noticed, h.noticeAt, h.stopAt = true, at, stopAt
	if h.nd != nil {
		h.nd.resum(h)
		e.touch(h.nd)
	}
}

// event is something that happens at a time: a node's window or price may
// change (h nil), or a bronze lease's window is about to end.
type event struct {
	at    int64
	seq   uint64
	nd    *node
	ver   uint64
	h     *hold
	hgen  uint64 // h's gen when the event was scheduled
	until int64  // the window end a notice event was scheduled for
}

func (e *Engine) push(ev event) {
	e.seq++
	ev.seq = e.seq
	e.events.Push(ev)
}

// Before orders events soonest first, then in the order they were pushed.
func (ev event) Before(o event) bool {
	if ev.at != o.at {
		return ev.at < o.at
	}
	return ev.seq < o.seq
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// eligibleLease is a bronze lease that passes the minimum runtime at at.
type eligibleLease struct {
	at  int64
	h   *hold
	gen uint64
}

// watchEligible arranges for a bronze lease younger than the minimum
// runtime to enter its node's plan entry once it is not.
func (e *Engine) watchEligible(h *hold) {
	at := h.start + e.cfg.MinRuntimeSeconds*int64(time.Second)
	if !h.bronzeRunning() || at <= e.eligibleAt {
		return
	}
	q := append(e.eligible, eligibleLease{at, h, h.gen})
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if q[p].at <= q[i].at {
			break
		}
		q[p], q[i] = q[i], q[p]
		i = p
	}
	e.eligible = q
}

// processEligible moves eligibleAt to now, updating the plan entries of
// the nodes whose bronze leases pass the minimum runtime by then, so that
// preemption plans are bounded by the leases they may stop.
func (e *Engine) processEligible(now int64) {
	if now <= e.eligibleAt {
		return
	}
	e.eligibleAt = now
	for q := e.eligible; len(q) > 0 && q[0].at <= now; q = e.eligible {
		x := q[0]
		last := len(q) - 1
		q[0] = q[last]
		q[last] = eligibleLease{}
		q = q[:last]
		for i := 0; ; {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(q) && q[l].at < q[m].at {
				m = l
			}
			if r < len(q) && q[r].at < q[m].at {
				m = r
			}
			if m == i {
				break
			}
			q[m], q[i] = q[i], q[m]
			i = m
		}
		e.eligible = q
		if h := x.h; h.gen == x.gen && h.nd != nil && h.bronzeRunning() {
			e.countRestart(h)
			e.eligibleGen++
		}
	}
}

// countRestart enters a bronze lease that just passed the minimum runtime
// in its node's plan entry.
func (e *Engine) countRestart(h *hold) {
	nd := h.nd
	old, p := nd.leafPlan, e.leafPlan(nd)
	if p == old {
		return
	}
	nd.leafPlan = p
	for i, s := range nd.shelves {
		s.updatePlan(int(nd.pos[i]), old, p)
	}
}
