package market

import (
	"container/heap"
	"fmt"
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Config tunes the Engine. Zero fields take the defaults.
type Config struct {
	// GoldMinReliability is the reliability a node needs to run gold jobs.
	// Default 0.9.
	GoldMinReliability float64
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
	sigs       map[sigKey]*signature
	cachedBy   map[string][]*class // dataset → classes with a sub-shelf for it

	leases       map[string]*hold
	claims       map[claimKey]*hold
	orphans      map[string]map[string]*hold // node ID → leases on a node that is not online
	checkpoints  map[string]int64            // lease ID → last checkpoint, kept while the lease lives
	reservations map[string]*reservation     // by job ID
	queued       map[string]*idlegrid.Job

	events eventHeap
	seq    uint64
	locs   map[string]*time.Location
	market map[cellKey]*cell

	dirty []*view // views to clean at the next Advance

	// Scratch for one search; the engine has one owner.
	mark   uint64
	top    topK
	bounds []classBound
	note   []byte
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
	old := map[string]*hold{}
	if nd == nil {
		nd = &node{id: n.ID}
		e.nodes[n.ID] = nd
	} else {
		e.unindex(nd)
		for _, s := range nd.slots {
			if s.hold != nil {
				old[s.gpu.UUID] = s.hold
			}
		}
	}
	nd.n = n
	nd.ver++
	nd.slots = nd.slots[:0]
	for _, g := range n.GPUs {
		nd.slots = append(nd.slots, slot{gpu: g, hold: old[g.UUID]})
	}
	slices.SortFunc(nd.slots, func(a, b slot) int { return compareStrings(a.gpu.UUID, b.gpu.UUID) })
	for _, h := range nd.holds {
		h.gpus = 0
		for _, s := range nd.slots {
			if s.hold == h {
				h.gpus++
			}
		}
	}
	nd.rel = clampReliability(n.Reliability)
	for t, tier := range idlegrid.Tiers {
		nd.floors[t], _ = n.Ask.Floor(tier)
	}
	nd.loc = e.location(n.Schedule.TimeZone)
	nd.datasets = slices.Compact(slices.Sorted(slices.Values(n.CachedDatasets)))
	nd.pct, nd.until, nd.nextOpen = 0, 0, 0
	nd.leaf = agg{rel: -1} // no entry written yet: leafAgg never gives this
	nd.setPrices(100)
	key, types := e.keyOf(nd)
	c := e.classFor(key, types)
	e.addToClass(c, nd)
	for _, ds := range nd.datasets {
		if !slices.Contains(e.cachedBy[ds], c) {
			e.cachedBy[ds] = append(e.cachedBy[ds], c)
		}
	}
	for _, h := range e.orphans[nd.id] {
		e.attach(h, nd)
	}
	delete(e.orphans, nd.id)
	nd.recount()
	e.refresh(nd)
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
		h.gpus = 0
		h.nd = nil
		if h.leaseID == "" {
			delete(e.claims, claimKey{h.jobID, nodeID})
			continue
		}
		if e.orphans[nodeID] == nil {
			e.orphans[nodeID] = map[string]*hold{}
		}
		e.orphans[nodeID][h.leaseID] = h
	}
	nd.holds = nil
	nd.ver++
	delete(e.nodes, nodeID)
}

// unindex takes a node out of its class and the dataset index.
func (e *Engine) unindex(nd *node) {
	c := nd.cls
	if c == nil {
		return
	}
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
	h := &hold{leaseID: l.ID, jobID: l.JobID, nodeID: l.NodeID, tier: l.Tier, uuids: slices.Clone(l.GPUUUIDs)}
	h.start = l.CreatedAt.UnixNano()
	if l.StartedAt != nil {
		h.start = l.StartedAt.UnixNano()
	}
	h.end = h.start + l.LimitSeconds*int64(time.Second)
	h.checkpoint = e.checkpoints[l.ID]
	if l.NoticeAt != nil {
		h.noticed, h.noticeAt = true, l.NoticeAt.UnixNano()
		h.noticeSeconds = l.NoticeSeconds
		if h.noticeSeconds == 0 {
			h.noticeSeconds = e.cfg.NoticeSeconds
		}
		h.stopAt = h.noticeAt + h.noticeSeconds*int64(time.Second)
	} else if prev != nil && prev.noticed { // the engine gave notice before the store recorded it
		h.noticed, h.noticeAt, h.stopAt, h.noticeSeconds = true, prev.noticeAt, prev.stopAt, prev.noticeSeconds
	}
	e.leases[l.ID] = h
	nd := e.nodes[l.NodeID]
	if nd == nil {
		if e.orphans[l.NodeID] == nil {
			e.orphans[l.NodeID] = map[string]*hold{}
		}
		e.orphans[l.NodeID][l.ID] = h
		return
	}
	e.attach(h, nd)
	nd.recount()
	e.touch(nd)
	e.scheduleNotice(nd, h)
}

// RemoveLease forgets a lease that ended, freeing its GPUs.
func (e *Engine) RemoveLease(leaseID string) {
	h := e.leases[leaseID]
	if h == nil {
		return
	}
	delete(e.leases, leaseID)
	delete(e.checkpoints, leaseID)
	if m := e.orphans[h.nodeID]; m != nil {
		delete(m, leaseID)
		if len(m) == 0 {
			delete(e.orphans, h.nodeID)
		}
	}
	e.detach(h)
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
		}
	}
}

// attach puts h on the node's slots of its GPUs, taking them from any
// other hold: the store, which refuses to assign a GPU twice, is the truth.
func (e *Engine) attach(h *hold, nd *node) {
	h.nd, h.gpus = nd, 0
	for _, u := range h.uuids {
		s := nd.slot(u)
		if s == nil {
			continue
		}
		if o := s.hold; o != nil && o != h {
			o.gpus--
			if o.gpus <= 0 {
				nd.holds = slices.DeleteFunc(nd.holds, func(x *hold) bool { return x == o })
				if o.leaseID == "" {
					delete(e.claims, claimKey{o.jobID, nd.id})
				}
			}
		}
		if s.hold != h {
			s.hold = h
			h.gpus++
		}
	}
	if h.gpus > 0 && !slices.Contains(nd.holds, h) {
		nd.holds = append(nd.holds, h)
	}
}

// detach frees h's GPUs.
func (e *Engine) detach(h *hold) {
	nd := h.nd
	if nd == nil {
		return
	}
	for i := range nd.slots {
		if nd.slots[i].hold == h {
			nd.slots[i].hold = nil
		}
	}
	nd.holds = slices.DeleteFunc(nd.holds, func(x *hold) bool { return x == h })
	h.nd, h.gpus = nil, 0
	nd.recount()
	e.touch(nd)
}

// touch tells the node's views that its free GPUs or window changed.
func (e *Engine) touch(nd *node) {
	if len(nd.shelves) == 0 {
		return
	}
	a := leafAgg(nd)
	if a == nd.leaf {
		return // no view's entry for it changes (a rebuild reads the node afresh)
	}
	nd.leaf = a
	for i, s := range nd.shelves {
		for t, v := range s.views {
			v.update(nd, nd.pos[i][t], a)
		}
	}
}

// reorder tells the node's views that its score changed.
func (e *Engine) reorder(nd *node) {
	for _, s := range nd.shelves {
		for _, v := range s.views {
			v.markDirty()
		}
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
	var out []Notice
	for len(e.events) > 0 && e.events[0].at <= e.nowNano {
		ev := heap.Pop(&e.events).(event)
		switch {
		case ev.h != nil:
			if n, ok := e.windowNotice(ev); ok {
				out = append(out, n)
			}
		case e.nodes[ev.nd.id] == ev.nd && ev.nd.ver == ev.ver:
			e.refresh(ev.nd)
		}
	}
	e.cleanViews()
	slices.SortFunc(out, func(a, b Notice) int {
		if c := a.StopAt.Compare(b.StopAt); c != 0 {
			return c
		}
		return compareStrings(a.LeaseID, b.LeaseID)
	})
	return out
}

// cleanViews applies the index changes waiting since the last Advance
// (nodes added or removed, prices reordered), so that Place seldom finds a
// view to rebuild.
func (e *Engine) cleanViews() {
	for _, v := range e.dirty {
		v.clean()
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
			// The span runs to the horizon: read it again well before then.
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
	nd.nextOpen = nextOpen
	if pct != nd.pct {
		nd.setPrices(pct)
		e.reorder(nd)
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
// window to be given notice NoticeSeconds before the window ends.
func (e *Engine) scheduleNotice(nd *node, h *hold) {
	if h.leaseID == "" || h.tier != idlegrid.TierBronze || h.noticed || nd.until == always || nd.until == 0 || h.end <= nd.until {
		return
	}
	e.push(event{at: nd.until - e.cfg.NoticeSeconds*int64(time.Second), nd: nd, h: h, until: nd.until})
}

// windowNotice gives a bronze lease notice because its window ends, if
// that is still so.
func (e *Engine) windowNotice(ev event) (Notice, bool) {
	h, nd := ev.h, ev.nd
	if e.leases[h.leaseID] != h || h.nd != nd || h.noticed || nd.until != ev.until || h.end <= nd.until {
		return Notice{}, false
	}
	e.giveNotice(h, e.nowNano, max(nd.until, e.nowNano+e.cfg.NoticeSeconds*int64(time.Second)))
	return Notice{
		LeaseID: h.leaseID, JobID: h.jobID, NodeID: nd.id, NoticeSeconds: e.cfg.NoticeSeconds,
		NoticeAt: e.now, StopAt: timeOf(h.stopAt),
		Reason: fmt.Sprintf("the window of node %s ends at %s", nd.id, timeOf(nd.until).Format(time.RFC3339)),
	}, true
}

// giveNotice records that h was given notice at at and stops at stopAt.
func (e *Engine) giveNotice(h *hold, at, stopAt int64) {
	h.noticed, h.noticeAt, h.stopAt = true, at, stopAt
	h.noticeSeconds = e.cfg.NoticeSeconds
	if h.nd != nil {
		h.nd.recount()
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
	until int64 // the window end a notice event was scheduled for
}

func (e *Engine) push(ev event) {
	e.seq++
	ev.seq = e.seq
	heap.Push(&e.events, ev)
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
