package market

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// tierCount is the number of tiers; a tier's index is its Rank.
const tierCount = 3

// always is the window end of a node offered around the clock.
const always = math.MaxInt64

// node is an online node as the engine keeps it.
type node struct {
	n   *idlegrid.Node
	id  string
	cls *class
	// shelves are the node sets it is in: its class, and per cached
	// dataset the class's sub-shelf of nodes caching it; pos[i] is its
	// index in shelves[i]'s views while they are clean.
	shelves []*shelf
	pos     [][tierCount]int
	ver     uint64 // bumps on every upsert and removal, so stale events are skipped

	slots  []slot // every GPU, by UUID
	free   int    // GPUs no hold has
	bronze int    // GPUs of bronze leases not yet given notice: what preemption could free
	holds  []*hold

	rel    float64                    // reliability clamped to [minReliability, 1]
	floors [tierCount]idlegrid.Micros // the ask's floor per tier; 0: not sold
	pct    int64                      // time-of-day multiplier in force, percent
	asks   [tierCount]idlegrid.Micros // floors × pct / 100
	s1     [tierCount]float64         // asks ÷ rel: the score at weight 1, the views' order
	loc    *time.Location

	until    int64 // unix nanos when the current window ends; 0 closed; always
	nextOpen int64 // unix nanos of the next opening when closed; 0 unknown

	leaf     agg      // the index entry last written for it by touch
	datasets []string // cached datasets, sorted
	res      *reservation
	resGPUs  int    // GPUs res holds here
	mark     uint64 // dedup scratch for one search
}

// slot is one GPU and the hold on it, if any.
type slot struct {
	gpu  idlegrid.GPU
	hold *hold
}

// hold is GPUs held on a node: a live lease, or a claim, which is a
// committed placement whose lease the coordinator has not added yet.
type hold struct {
	leaseID string // empty for a claim
	jobID   string
	nodeID  string
	nd      *node // nil while the node is offline
	tier    idlegrid.Tier
	uuids   []string
	gpus    int // slots it holds on nd

	start      int64 // unix nanos: started, or created when not started yet
	end        int64 // expected end: start + limit
	checkpoint int64 // unix nanos of the last checkpoint; 0 none

	noticed       bool
	noticeAt      int64
	stopAt        int64
	noticeSeconds int64
}

// freeBy is when the hold's GPUs should be free: its expected end, or the
// end of its notice when that comes first.
func (h *hold) freeBy() int64 {
	if h.noticed && h.stopAt < h.end {
		return h.stopAt
	}
	return h.end
}

// preemptible reports whether h is a bronze lease that may be given notice
// for higher-tier work at now.
func (h *hold) preemptible(now, minRuntime int64) bool {
	return h.leaseID != "" && h.tier == idlegrid.TierBronze && !h.noticed && now-h.start >= minRuntime
}

// lostGPUSeconds is the work stopping h at now throws away.
func (h *hold) lostGPUSeconds(now int64) int64 {
	since := max(h.start, h.checkpoint)
	return max(0, (now-since)/int64(time.Second)) * int64(h.gpus)
}

// reservation is GPUs held for a job from start on.
type reservation struct {
	jobID      string
	start      int64
	end        int64 // start + the job's duration, for estimates
	nodes      []*node
	gpus       []int
	preempting bool
}

// public returns r as the API shows it, starting at start.
func (r *reservation) public(start int64) *Reservation {
	p := &Reservation{JobID: r.jobID, Start: timeOf(start), Preempting: r.preempting}
	for i, nd := range r.nodes {
		p.Nodes = append(p.Nodes, ReservedNode{NodeID: nd.id, GPUs: r.gpus[i]})
	}
	return p
}

// recount recomputes the node's free and preemptible GPU counts.
func (nd *node) recount() {
	nd.free, nd.bronze = 0, 0
	for i := range nd.slots {
		if nd.slots[i].hold == nil {
			nd.free++
		}
	}
	for _, h := range nd.holds {
		if h.leaseID != "" && h.tier == idlegrid.TierBronze && !h.noticed {
			nd.bronze += h.gpus
		}
	}
}

// slot returns the slot of the GPU with the given UUID, or nil.
func (nd *node) slot(uuid string) *slot {
	i, ok := slices.BinarySearchFunc(nd.slots, uuid, func(s slot, u string) int { return strings.Compare(s.gpu.UUID, u) })
	if !ok {
		return nil
	}
	return &nd.slots[i]
}

// setPrices applies a time-of-day multiplier to the floors.
func (nd *node) setPrices(pct int64) {
	nd.pct = pct
	for t := range tierCount {
		nd.asks[t] = nd.floors[t] * idlegrid.Micros(pct) / 100
		nd.s1[t] = float64(nd.asks[t]) / nd.rel
	}
}

// posIn returns where the node's index in v is kept.
func (nd *node) posIn(v *view) *int {
	for i, s := range nd.shelves {
		if s == v.shelf {
			return &nd.pos[i][v.tier]
		}
	}
	return nil
}

// cachesAny reports whether the node holds any of the job's datasets.
func (nd *node) cachesAny(job *idlegrid.Job) bool {
	if len(nd.datasets) == 0 {
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
	n := nd.free
	for _, h := range nd.holds {
		if h.freeBy() <= t {
			n += h.gpus
		}
	}
	return n
}

// clampReliability keeps a reliability in [minReliability, 1], so that a
// node at or below zero ranks last rather than dividing by zero.
func clampReliability(r float64) float64 {
	return min(max(r, minReliability), 1)
}

func timeOf(nanos int64) time.Time {
	if nanos == always {
		return time.Time{}
	}
	return time.Unix(0, nanos).UTC()
}
