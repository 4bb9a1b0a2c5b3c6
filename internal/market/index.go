package market

import (
	"math"
	"time"
)

// agg is what a subtree of a shelf's tree knows about its nodes: the most
// (or for scores and reliability the least) of each quantity any one of
// them has. A search skips a subtree whose bounds cannot meet the job, so
// busy nodes, closed windows, reserved GPUs and asks above the cap cost
// nothing. Bounds only: a leaf is always checked exactly. Times are whole
// seconds since aggEpoch, rounded the way that keeps each a bound. The
// struct is 32 bytes, so that a node and its sibling share a cache line:
// walks and updates are bound by memory.
type agg struct {
	// s1 is, per tier, the least weight-1 score (ask ÷ reliability) of an
	// open node with a free GPU in the tier's view (it sells the tier and,
	// for gold, meets the bar), rounded down; +Inf when none is. Busy
	// nodes, which are most often the cheap ones, do not lower it.
	s1       [tierCount]score32
	until    uint32  // latest window end (rounded up); 0: closed
	resStart uint32  // latest start of a reservation on a node whose free GPUs it holds back (rounded up); 0: none
	rel      score32 // lowest reliability, rounded down
	ram      uint16  // most RAM, in GiB rounded up, saturated
	cpu      int16
	free     int8 // free GPUs on open nodes
	freeLong int8 // ... that a job still running when a reservation starts may use
	// preempt is free GPUs plus GPUs of bronze leases without notice, on
	// open unreserved nodes: at most what preempting could free. Bronze
	// claims count too, so that a lease replacing its claim changes no
	// entry.
	preempt int8
	gpus    int8 // all GPUs of open unreserved nodes: what a new reservation could hold
}

// planAgg is what only plans read of a subtree, kept apart from agg so
// that the placement path reads and writes less. It is 32 bytes, so that
// two share a cache line.
type planAgg struct {
	s1 [tierCount]score32 // as agg.s1, of every node in the tier's view, busy or not
	// restart bounds what preempting bronze leases there would lose (see
	// coverRestarts and lossBound): restart[0] is the latest start or
	// checkpoint of a bronze lease past the minimum runtime, without
	// notice (rounded up); 0: none. For b > 0, restart[b] is the latest,
	// over the nodes, of a time such that stopping leases to free a job of
	// coverGPUs[b] GPUs there loses at least the time since, while no hold
	// ends before laterEnd but those counted free; 0: no node there needs
	// and can free that many.
	restart  [coverBands]uint32
	firstEnd uint32 // earliest time a hold should end (rounded down): no reservation can start before
	// laterEnd is the earliest end (rounded down) of a hold the bands of
	// restart do not count free, on a node with a lease preemption could
	// stop (MaxUint32: none).
	laterEnd uint32
}

// coverBands is how many job sizes planAgg keeps restarts for, and
// coverGPUs the least GPUs of a job each serves: a job of g GPUs reads the
// band of the largest coverGPUs at most g.
const coverBands = 3

var coverGPUs = [coverBands]int{1, 4, 8}

// coverBand is the band a job of g GPUs reads.
func coverBand(g int) int {
	switch {
	case g >= 8:
		return 2
	case g >= 4:
		return 1
	}
	return 0
}

// aggEpoch is the zero of agg's times, one second before the unix epoch,
// in unix nanos: every time from 1970 to 2106 is at least 1 (0 means
// none) and fits in a uint32.
const aggEpoch = -int64(time.Second)

// secDown and secUp turn unix nanos into agg seconds, rounding down or up;
// always is the largest.
func secDown(t int64) uint32 {
	switch {
	case t == always:
		return math.MaxUint32
	case t <= aggEpoch:
		return 0
	}
	return uint32(min((t-aggEpoch)/int64(time.Second), math.MaxUint32-1))
}

func secUp(t int64) uint32 {
	switch {
	case t == always:
		return math.MaxUint32
	case t <= aggEpoch:
		return 0
	}
	return uint32(min((t-aggEpoch+int64(time.Second)-1)/int64(time.Second), math.MaxUint32-1))
}

// secNanos turns agg seconds back into unix nanos.
func secNanos(s uint32) int64 {
	if s == math.MaxUint32 {
		return always
	}
	return aggEpoch + int64(s)*int64(time.Second)
}

// score32 is a non-negative float64 (a score or a reliability) rounded
// down to a float32, as its bits: for non-negative floats the bits order
// as the values do, so aggregates are all integers, compared and combined
// as such.
type score32 uint32

// noScore is +Inf: no node.
const noScore = score32(0x7f800000)

// lowScore rounds x down to a score32, so that it stays a lower bound.
func lowScore(x float64) score32 { return score32(math.Float32bits(lowFloat32(x))) }

func (s score32) float() float64 { return float64(math.Float32frombits(uint32(s))) }

// emptyAgg and emptyPlan fill the leaves past the last node.
var (
	emptyAgg  = agg{s1: [tierCount]score32{noScore, noScore, noScore}, rel: lowScore(1)}
	emptyPlan = planAgg{s1: [tierCount]score32{noScore, noScore, noScore}, firstEnd: math.MaxUint32, laterEnd: math.MaxUint32}
)

// leafAgg is a node's own entry. A closed node (its window not open) can
// take nothing, so it counts no free GPUs: otherwise idle closed nodes,
// which have every GPU free, would make every subtree look promising.
func leafAgg(nd *node) agg {
	a := nd.base
	if nd.free == 0 || nd.until == 0 {
		a.s1 = emptyAgg.s1
	}
	if nd.until == 0 {
		return a
	}
	a.until = max(1, secUp(nd.until))
	a.free = int8(min(nd.free, math.MaxInt8))
	a.freeLong = a.free
	if r := nd.res; r != nil {
		a.freeLong = int8(min(nd.longFree(r), math.MaxInt8))
		if a.freeLong < a.free {
			a.resStart = max(1, secUp(r.start))
		}
	} else {
		a.preempt = int8(min(int(nd.free)+nd.bronze, math.MaxInt8))
		a.gpus = int8(min(len(nd.gpus), math.MaxInt8))
	}
	return a
}

// leafPlan is a node's own plan entry as of eligibleAt, which it records
// in the node. Its restarts count only bronze leases past the minimum
// runtime then (see processEligible): the younger ones, which cannot be
// preempted yet, would make every subtree look cheap to preempt in.
func (e *Engine) leafPlan(nd *node) planAgg {
	p, _ := e.planOf(nd, e.eligibleAt)
	nd.planAt = e.eligibleAt
	return p
}

// planOf is the node's plan entry as of at, and the GPUs of its bronze
// holds not given notice. Its cover bands count free the GPUs of holds
// that end by the end of a notice given at at, as a preemption then would
// (see victimsOn).
func (e *Engine) planOf(nd *node, at int64) (planAgg, int) {
	p := nd.basePlan
	bronze, eligible := 0, at-e.cfg.MinRuntimeSeconds*int64(time.Second)
	soon := at + e.cfg.NoticeSeconds*int64(time.Second)
	var victims [inlineSlots]victimSum
	n, free, laterEnd := 0, int(nd.free), uint32(math.MaxUint32)
	for i := range nd.sums {
		h := &nd.sums[i]
		p.firstEnd = min(p.firstEnd, secDown(h.freeBy))
		if h.freeBy <= soon {
			free += int(h.gpus)
		} else {
			laterEnd = min(laterEnd, secDown(h.freeBy))
		}
		if h.bronze {
			bronze += int(h.gpus)
			if h.lease && h.start <= eligible {
				p.restart[0] = max(p.restart[0], secUp(h.restart))
				if h.freeBy > soon {
					n = addVictim(&victims, n, victimSum{secUp(h.restart), h.gpus})
				}
			}
		}
	}
	if p.restart[0] != 0 { // a node with no lease to stop has no bands, and no later end that could spoil them
		coverRestarts(&p.restart, victims[:min(n, inlineSlots)], n > inlineSlots, free, nd.mixed, secDown(at))
		p.laterEnd = laterEnd
	}
	return p, bronze
}

// victimSum is a bronze lease preemption could stop: when it restarted
// (agg seconds, rounded up) and its GPUs.
type victimSum struct {
	restart uint32
	gpus    int32
}

// addVictim adds v to the n kept in vs, latest restart first; past
// inlineSlots it keeps the latest.
func addVictim(vs *[inlineSlots]victimSum, n int, v victimSum) int {
	i := min(n, inlineSlots-1)
	if n >= inlineSlots && v.restart <= vs[i].restart {
		return n + 1
	}
	for ; i > 0 && vs[i-1].restart < v.restart; i-- {
		vs[i] = vs[i-1]
	}
	vs[i] = v
	return n + 1
}

// coverRestarts fills the cover bands of a node's planAgg.restart as of
// now (agg seconds), given restart[0], its preemptible bronze leases
// that do not end by a notice's end (latest restart first; more, when
// more is set, that restarted no later than the last) and the GPUs free
// by then. For each band the node must free need GPUs, what a job of
// coverGPUs[b] needs beyond the free ones (at least one): it takes them
// from the latest restarted leases first, as if a lease could be split
// (stopping whole leases can only lose more), and their mean restart m,
// rounded up. The loss is then at least need × (t − m) at any time t,
// which from now on is at least t − r for r = m − (need − 1)(now − m):
// the band keeps r, so that a subtree's latest r bounds its nodes' losses
// whatever each needs. A larger need never loses less, so a band bounds
// every job at least its size. A node that cannot free what it needs
// keeps 0 there: no plan that stops leases there serves such a job. A
// node of mixed GPUs, where not every free GPU or lease may serve a job,
// keeps restart[0] in every band.
func coverRestarts(r *[coverBands]uint32, vs []victimSum, more bool, free int, mixed bool, now uint32) {
	for b := 1; b < coverBands; b++ {
		if mixed {
			r[b] = r[0]
			continue
		}
		need := max(1, coverGPUs[b]-free) // a larger job of the band may need one
		left, sum := need, uint64(0)
		for _, v := range vs {
			take := min(left, int(v.gpus))
			sum += uint64(take) * uint64(v.restart)
			if left -= take; left == 0 {
				break
			}
		}
		switch {
		case left > 0 && more:
			sum += uint64(left) * uint64(vs[len(vs)-1].restart) // the rest restarted no later
		case left > 0:
			return // nor can a larger band's need be freed
		}
		m := int64((sum + uint64(need) - 1) / uint64(need))
		r[b] = uint32(min(max(1, m-int64(need-1)*(int64(now)-m)), math.MaxUint32-1))
	}
}

// entries recounts the node's free and preemptible GPUs, and returns its
// index entries (leafAgg and leafPlan) in one pass over its holds.
func (e *Engine) entries(nd *node) (agg, planAgg) {
	nd.free = 0
	for _, h := range nd.held {
		if h == nil {
			nd.free++
		}
	}
	var p planAgg
	p, nd.bronze = e.planOf(nd, e.eligibleAt)
	nd.planAt = e.eligibleAt
	return leafAgg(nd), p
}

// setBase computes the parts of the node's entries that only its offer,
// record and prices decide.
func (nd *node) setBase() {
	nd.base = agg{rel: lowScore(nd.rel), ram: ramGiB(int(nd.ram)), cpu: int16(min(nd.cpu, math.MaxInt16))}
	nd.basePlan = planAgg{firstEnd: math.MaxUint32, laterEnd: math.MaxUint32}
	for t := range tierCount {
		nd.base.s1[t] = noScore
		if nd.inView(t) {
			nd.base.s1[t] = lowScore(nd.s1[t])
		}
	}
	nd.basePlan.s1 = nd.base.s1
}

// ramGiB is RAM in MB as agg keeps it: GiB rounded up, saturated, so that
// it stays an upper bound.
func ramGiB(mb int) uint16 {
	return uint16(min((max(mb, 0)+1023)/1024, math.MaxUint16))
}

// lowFloat32 rounds x down to a float32, so that it stays a lower bound.
func lowFloat32(x float64) float32 {
	f := float32(x)
	if float64(f) > x {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}

func combine(a, b agg) agg {
	return agg{
		s1:    [tierCount]score32{min(a.s1[0], b.s1[0]), min(a.s1[1], b.s1[1]), min(a.s1[2], b.s1[2])},
		until: max(a.until, b.until), resStart: max(a.resStart, b.resStart), rel: min(a.rel, b.rel),
		ram: max(a.ram, b.ram), cpu: max(a.cpu, b.cpu),
		free: max(a.free, b.free), freeLong: max(a.freeLong, b.freeLong), preempt: max(a.preempt, b.preempt),
		gpus: max(a.gpus, b.gpus),
	}
}

func combinePlan(a, b planAgg) planAgg {
	return planAgg{
		s1:       [tierCount]score32{min(a.s1[0], b.s1[0]), min(a.s1[1], b.s1[1]), min(a.s1[2], b.s1[2])},
		restart:  [coverBands]uint32{max(a.restart[0], b.restart[0]), max(a.restart[1], b.restart[1]), max(a.restart[2], b.restart[2])},
		firstEnd: min(a.firstEnd, b.firstEnd), laterEnd: min(a.laterEnd, b.laterEnd),
	}
}

// cpuOK reports whether the subtree may have cpu cores; the aggregate
// saturates at MaxInt16.
func (a *agg) cpuOK(cpu int) bool { return int(a.cpu) >= min(cpu, math.MaxInt16) }

// ramOK reports whether the subtree may have ram MB.
func (a *agg) ramOK(ram int) bool { return a.ram >= ramGiB(ram) }

// gpusOK compares a GPU count with an aggregate, which saturates at MaxInt8.
func gpusOK(have int8, need int) bool { return int(have) >= min(need, math.MaxInt8) }

// mayPlace reports whether a subtree may hold a node that can take q now:
// one that is open long enough, big enough, and has q.g free GPUs that no
// reservation holds back from q (a job that ends before a reservation
// starts may use all the free GPUs).
func (a *agg) mayPlace(q *query) bool {
	return a.until >= q.needUntilSec && a.cpu >= q.cpu16 && a.ram >= q.ramGiB &&
		(a.freeLong >= q.g8 || (a.free >= q.g8 && a.resStart >= q.endSec))
}
