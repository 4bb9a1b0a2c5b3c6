package market

import (
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/idlegrid/idlegrid"
)

// tierCount is the number of tiers; a tier's index is its Rank.
const tierCount = 3

// inlineSlots is how many GPUs' holds a node keeps in its own memory.
const inlineSlots = 8

// always is the window end of a node offered around the clock.
const always = math.MaxInt64

// node is an online node as the engine keeps it. The fields a search
// reads at every leaf it judges come first, so that judging a node costs
// one or two cache lines.
type node struct {
	// The first cache line: what judging a node for a job reads.
	until    int64                      // unix nanos when the current window ends; 0 closed; always
	asks     [tierCount]idlegrid.Micros // floors × pct / 100
	rel      float64                    // reliability clamped to [minReliability, 1]
	mark     uint64                     // the last search that judged it
	cpu, ram int32                      // the node's CPU cores and RAM MB, saturated (see hasCPU)
	free     int32                      // GPUs no hold has
	views    uint8                      // bit t: the node is in tier t's view (sells it and, for gold, meets the bar)
	cached   bool                       // it caches some dataset
	mixed    bool                       // its class has more than one kind of GPU
	reserved bool                       // res is set

	s1  [tierCount]float64 // asks ÷ rel: the score at weight 1
	res *reservation
	cls *class

	resGPUs int     // GPUs res holds here
	bronze  int     // GPUs of bronze holds not yet given notice: at most what preemption could free
	key     float64 // its place in its shelves' order: the weight-1 score at its key tier

	n  *idlegrid.Node
	id string
	// provider and offer are the engine's own copy of what it indexed the
	// node by, which a new record must match to only move it (restand.go).
	provider string
	offer    idlegrid.Offer
	// cell is the market view's cell of cellModel in its region, once a
	// pick of it has cleared. Commit records each pick's price there, and
	// reads n and id beside it.
	cell      *cell
	cellModel string
	// gpus are its GPUs by UUID, its slots; held is the hold on each
	// slot (nil: free), and holds lists them, with sums[i] what its index
	// entries read of holds[i] (kept by addHold, dropHold and resum). All
	// live in the node's own buffers while they fit, so that a change of
	// holds reads no more memory than it must.
	gpus  []idlegrid.GPU
	held  []*hold
	holds []*hold
	sums  []holdSum
	// shelves are the node sets it is in: its class, and per cached
	// dataset the class's sub-shelf of nodes caching it; pos[i] is its
	// index in shelves[i] while that is clean. They live in the node's
	// own buffers while it is on at most two, as most nodes are.
	shelves    []*shelf
	pos        []int32
	shelvesBuf [2]*shelf
	posBuf     [2]int32
	// What touch reads and writes besides the holds, kept beside them.
	leaf     agg     // its index entry, kept by touch
	leafPlan planAgg // its plan entry, kept by touch
	planAt   int64   // the eligibleAt leafPlan is as of
	base     agg     // what of leaf its offer, record and prices decide (see setBase)
	basePlan planAgg
	// The buffers of held, holds and sums (see gpus).
	heldBuf  [inlineSlots]*hold
	holdsBuf [inlineSlots]*hold
	sumsBuf  [inlineSlots]holdSum
	ver      uint64 // bumps on every upsert and removal, so stale events are skipped

	floors [tierCount]idlegrid.Micros // the ask's floor per tier; 0: not sold
	pct    int64                      // time-of-day multiplier in force, percent
	loc    *time.Location

	nextOpen int64 // unix nanos of the next opening when closed; 0 unknown
	// nextUntil is when the window opening at nextOpen ends, as Explain
	// last read it; 0: not read since the last refresh.
	nextUntil int64
	rankMark  uint64 // the last rerank that found it in its list (ranked.go)
	// schedID is its schedule's ID for the windows Explain reads (spans.go),
	// valid while schedGen is the engine's; 0: none yet.
	schedID, schedGen uint32

	datasets []string // cached datasets, sorted
}

// hold is GPUs held on a node: a live lease, or a claim, which is a
// committed placement whose lease the coordinator has not added yet.
// Holds are reused once released; gen tells a stale reference apart. The
// fields that freeing its GPUs reads come first, so that RemoveLease
// reads as few cache lines of it as it can.
type hold struct {
	nd      *node // nil while the node is offline
	gpus    int   // slots it holds on nd
	gen     uint64
	bronze  bool // a bronze lease or claim
	noticed bool
	leaseID string // empty for a claim
	jobID   string
	nodeID  string

	start int64 // unix nanos: started, or created when not started yet
	end   int64 // expected end: start + limit
	// due is the end a lease's placement promised: created + limit, before
	// any start delay; its window notice is judged by it (see outlives).
	// A claim's is its end.
	due        int64
	checkpoint int64 // unix nanos of the last checkpoint; 0 none
	noticeAt   int64
	stopAt     int64

	uuids []string // its GPUs, kept while the node is offline

	gang *gang // the holds of its job's other nodes, for a job on several; nil else
}

// gang links the holds of one placement of a job that runs on several
// nodes. A gang runs whole or not at all: stopping one of its leases stops
// the rest (the coordinator does), and it counts its run from zero after,
// its checkpoints being spread over its nodes. So a victim's loss is its
// gang's (see victimLoss), and its notice is theirs too (siblings).
type gang struct {
	holds []*hold
}

// link makes holds one gang, each leaving any it was in.
func link(holds []*hold) {
	if len(holds) < 2 {
		return
	}
	g := &gang{holds: make([]*hold, 0, len(holds))}
	for _, h := range holds {
		h.join(g)
	}
}

// join puts h in gang g (nil: none), taking it out of its own.
func (h *hold) join(g *gang) {
	if h.gang == g {
		return
	}
	if old := h.gang; old != nil {
		if i := slices.Index(old.holds, h); i >= 0 {
			old.holds = slices.Delete(old.holds, i, i+1)
		}
	}
	h.gang = g
	if g != nil {
		g.holds = append(g.holds, h)
	}
}

// holdSum is what a node's index entries read of one of its holds.
type holdSum struct {
	freeBy  int64 // see hold.freeBy
	start   int64
	restart int64 // the later of start and checkpoint
	gpus    int32
	bronze  bool // a bronze hold not given notice
	lease   bool
}

func sumOf(h *hold) holdSum {
	return holdSum{freeBy: h.freeBy(), start: h.start, restart: h.restart(), gpus: int32(h.gpus),
		bronze: h.bronze && !h.noticed, lease: h.leaseID != ""}
}

// addHold lists h among the node's holds.
func (nd *node) addHold(h *hold) {
	nd.holds = append(nd.holds, h)
	nd.sums = append(nd.sums, sumOf(h))
}

// dropHold takes h off the node's holds.
func (nd *node) dropHold(h *hold) {
	if i := slices.Index(nd.holds, h); i >= 0 {
		nd.holds = slices.Delete(nd.holds, i, i+1)
		nd.sums = slices.Delete(nd.sums, i, i+1)
	}
}

// resum refreshes the summary of h, one of the node's holds, after a
// change.
func (nd *node) resum(h *hold) {
	if i := slices.Index(nd.holds, h); i >= 0 {
		nd.sums[i] = sumOf(h)
	}
}

// resumAll refreshes every summary.
func (nd *node) resumAll() {
	nd.sums = nd.sums[:0]
	for _, h := range nd.holds {
		nd.sums = append(nd.sums, sumOf(h))
	}
}

// freeBy is when the hold's GPUs should be free: its expected end, or the
// end of its notice when that comes first.
func (h *hold) freeBy() int64 {
	if h.noticed && h.stopAt < h.end {
		return h.stopAt
	}
	return h.end
}

// bronzeRunning reports whether h is a bronze lease not given notice: one
// that preemption could stop, once old enough.
func (h *hold) bronzeRunning() bool {
	return h.bronze && !h.noticed && h.leaseID != ""
}

// preemptible reports whether h is a bronze lease that may be given notice
// for higher-tier work at now.
func (h *hold) preemptible(now, minRuntime int64) bool {
	return h.bronzeRunning() && now-h.start >= minRuntime
}

// restart is where h's work would resume after a stop: its last
// checkpoint, or its start when it has none or is a gang's.
func (h *hold) restart() int64 {
	if h.gang != nil {
		return h.start
	}
	return max(h.start, h.checkpoint)
}

// lostGPUSeconds is the work stopping h at now throws away on its own
// node: its GPUs' time since its restart.
func (h *hold) lostGPUSeconds(now int64) int64 {
	return max(0, (now-h.restart())/int64(time.Second)) * int64(h.gpus)
}

// victimLoss is the work stopping h at now throws away: on its own node,
// and for a gang's lease on every node of the gang still running.
func (h *hold) victimLoss(now int64) int64 {
	if h.gang == nil {
		return h.lostGPUSeconds(now)
	}
	var lost int64
	for _, s := range h.siblings() {
		lost += s.lostGPUSeconds(now)
	}
	return lost
}

// siblings are the bronze leases not given notice that stopping h stops
// with it: h itself, and its gang's others. A claim has no workload yet
// to lose, and a lease given notice is stopping anyway.
func (h *hold) siblings() []*hold {
	if h.gang == nil {
		return []*hold{h}
	}
	var out []*hold
	for _, s := range h.gang.holds {
		if s == h || s.bronzeRunning() {
			out = append(out, s)
		}
	}
	return out
}

// reservation is GPUs held for a job from start on.
type reservation struct {
	jobID      string
	start      int64
	end        int64 // start + the job's duration, for estimates
	nodes      []*node
	gpus       []int
	preempting bool
	// eligibleGen is the engine's eligibleGen when the reservation was
	// committed: its job's plan looks for a preemption again only once a
	// bronze lease has passed the minimum runtime since (preemptSooner).
	eligibleGen uint64
	// models and vram are the job's GPU models and least VRAM: on a node
	// with more than one kind of GPU, it holds only GPUs it can use.
	models []string
	vram   int
}

// uses reports whether the reserved job can use g, as usableBy says.
func (r *reservation) uses(g idlegrid.GPU) bool {
	return modelAllowed(r.models, g.Model) && g.VRAMMB >= r.vram
}

// public returns r as the API shows it, starting at start.
func (r *reservation) public(start int64) *Reservation {
	p := &Reservation{JobID: r.jobID, Start: timeOf(start), Preempting: r.preempting}
	for i, nd := range r.nodes {
		p.Nodes = append(p.Nodes, ReservedNode{NodeID: nd.id, GPUs: r.gpus[i]})
	}
	return p
}

// label names the node for people in a reason: by its name and ID, or
// its ID alone when the name says no more (names need not be unique).
func (nd *node) label() string {
	if nd.n == nil || nd.n.Name == "" || nd.n.Name == nd.id {
		return nd.id
	}
	return nd.n.Name + " (" + nd.id + ")"
}

// hasCPU and hasRAM report whether the node has that many CPU cores and
// MB of RAM.
func (nd *node) hasCPU(cores int) bool {
	return int(nd.cpu) >= cores || (nd.cpu == math.MaxInt32 && nd.n.CPUCores >= cores)
}

func (nd *node) hasRAM(mb int) bool {
	return int(nd.ram) >= mb || (nd.ram == math.MaxInt32 && nd.n.RAMMB >= mb)
}

// setRes sets the node's reservation, holding gpus of its GPUs.
func (nd *node) setRes(r *reservation, gpus int) {
	nd.res, nd.resGPUs, nd.reserved = r, gpus, r != nil
}

// inView reports whether the node is in tier t's view: it sells t, and for
// gold meets the bar.
func (nd *node) inView(t int) bool { return nd.views&(1<<t) != 0 }

// slot returns the index of the slot of the GPU with the given UUID, or
// -1. The UUIDs a coordinator passes back are most often the very strings
// the engine handed out, so it looks for those first, without reading
// any bytes.
func (nd *node) slot(uuid string) int {
	for i := range nd.gpus {
		if sameString(nd.gpus[i].UUID, uuid) {
			return i
		}
	}
	i, ok := slices.BinarySearchFunc(nd.gpus, uuid, func(g idlegrid.GPU, u string) int { return strings.Compare(g.UUID, u) })
	if !ok {
		return -1
	}
	return i
}

// sameString reports whether a and b are the same string in memory: equal
// without comparing their bytes. False says nothing.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// setPrices applies a time-of-day multiplier to the floors.
func (nd *node) setPrices(pct int64) {
	nd.pct = pct
	for t := range tierCount {
		nd.asks[t] = nd.floors[t] * idlegrid.Micros(pct) / 100
		nd.s1[t] = float64(nd.asks[t]) / nd.rel
	}
	switch {
	case nd.floors[1] > 0:
		nd.key = nd.s1[1]
	case nd.floors[2] > 0:
		nd.key = nd.s1[2]
	default:
		nd.key = nd.s1[0]
	}
	nd.setBase()
}

// cachesAny reports whether the node holds any of the job's datasets.
func (nd *node) cachesAny(job *idlegrid.Job) bool {
	if !nd.cached {
		return false
	}
	for _, d := range job.Datasets {
		if nd.caches(d.Name) {
			return true
		}
	}
	return false
}

// caches reports whether the node holds the dataset.
func (nd *node) caches(name string) bool {
	_, ok := slices.BinarySearch(nd.datasets, name)
	return ok
}

// freeAt is how many GPUs should be free at t: free now, plus those of
// holds that end by then.
func (nd *node) freeAt(t int64) int {
	n := int(nd.free)
	for i := range nd.sums {
		if s := &nd.sums[i]; s.freeBy <= t {
			n += int(s.gpus)
		}
	}
	return n
}

// freeFor is how many GPUs of nd its reservation r could use at r's
// start: free now, or held by holds that end by then. On a node with one
// kind of GPU that is freeAt; on one with more, only the GPUs r can use
// count.
func (nd *node) freeFor(r *reservation) int {
	if !nd.mixed {
		return nd.freeAt(r.start)
	}
	n := 0
	for i, h := range nd.held {
		if (h == nil || h.freeBy() <= r.start) && r.uses(nd.gpus[i]) {
			n++
		}
	}
	return n
}

// spareFor is how many of nd's free GPUs its reservation r cannot use:
// work of any length may take them.
func (nd *node) spareFor(r *reservation) int {
	if !nd.mixed {
		return 0
	}
	n := 0
	for i, h := range nd.held {
		if h == nil && !r.uses(nd.gpus[i]) {
			n++
		}
	}
	return n
}

// clampReliability keeps a reliability in [minReliability, 1], so that a
// node at or below zero ranks last rather than dividing by zero. One that
// is not a number (NaN, which min and max pass through) ranks last too.
func clampReliability(r float64) float64 {
	if !(r >= minReliability) {
		return minReliability
	}
	return min(r, 1)
}

func timeOf(nanos int64) time.Time {
	if nanos == always {
		return time.Time{}
	}
	return time.Unix(0, nanos).UTC()
}
