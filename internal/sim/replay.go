package sim

import (
	"context"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/minheap"
)

// matcher is what a replay runs: the engine, or a baseline. The replay
// owns the clock, the queue, the leases and the money; the matcher only
// decides, and hears what the replay did, as the engine hears from the
// coordinator.
type matcher interface {
	// byTier reports whether passes serve gold, then silver, then bronze
	// (oldest first in each); false serves strictly by arrival.
	byTier() bool
	// wantsWindows reports whether the matcher needs windowOpened and
	// windowClosed (the engine reads windows from the nodes' schedules).
	wantsWindows() bool
	start(r *replay)
	advance(now int64) []notice
	nextEvent() int64 // the next time it has something to do; 0: none
	place(j *liveJob, now int64) decision
	commit(j *liveJob, d *decision, now int64)
	leaseStarted(l *lease)
	leaseNoticed(l *lease)
	leaseEnded(l *lease)
	checkpoint(l *lease, at int64)
	queued(j *liveJob)
	forget(j *liveJob)
	recordsChanged(ns []*nodeState)
	windowOpened(n *nodeState, w int)
	windowClosed(n *nodeState)
	republish(now int64)
}

// decision is a matcher's answer for one job: picks (placed), or notices
// to give (preempt) and a reservation, or only a reason.
type decision struct {
	picks    []pick
	preempt  []string // lease IDs
	reserved bool     // GPUs are held for the job (the engine's reservations)
	reason   string
	raw      any // the engine's market.Decision, for its Commit
}

type pick struct {
	node  int32
	gpus  []idlegrid.GPU // the engine's; nil for baselines
	n     int
	price idlegrid.Micros
}

// notice is a bronze lease to stop at stopAt.
type notice struct {
	leaseID string
	stopAt  int64
}

// liveJob is a job that has arrived and not yet finished or given up.
type liveJob struct {
	idx       int32
	spec      *jobSpec
	eng       *idlegrid.Job // the engine's view, when the engine runs
	remaining int64         // seconds of work left
	attempts  int
	arrived   int64
	qgen      uint32 // bumps each time it joins the queue
	queued    bool
	started   bool
	tried     bool // tried since it last joined the queue
	reserved  bool // the matcher holds GPUs for it: no other job speaks for it
	reason    string
	// asked is whether the matcher was asked, when the job first waited,
	// when it should start (see estimator); estimate is its answer, in
	// seconds, 0 when it had none.
	asked    bool
	estimate int64
	running  int             // live leases
	leases   []*lease        // of its current placement
	charged  idlegrid.Micros // every charge so far
}

// lease is one node's share of a placed job.
type lease struct {
	id         string
	job        *liveJob
	node       *nodeState
	gpus       []idlegrid.GPU
	n          int
	price      idlegrid.Micros
	start, end int64 // end: when it completes if nothing stops it
	noticed    bool
	stopAt     int64
	windowEnd  bool // its notice is for its window's end, not for a preemption
	done       bool
}

// nodeState is a node during one run.
type nodeState struct {
	n                 *simNode
	completed, failed int64 // its record, history included
	dirty             bool
	used              int
	win               int  // the window open now, or the next one
	open              bool // a window is open now
}

// reliability is the node's record as the market sees it.
func (s *nodeState) reliability() float64 { return idlegrid.ReliabilityOf(s.completed, s.failed) }

// Event kinds.
const (
	evEnd uint8 = iota
	evFail
	evStop
	evCheckpoint
	evDeadline
	evSample
	evTick
	evRecords
	evDaily
	evWinOpen
	evWinClose
)

type event struct {
	at   int64
	seq  uint64
	l    *lease
	n    *nodeState
	job  int32
	gen  uint32
	kind uint8
}

// Before orders events by time, then by the order they were pushed.
func (e event) Before(o event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

// replay is one run of the world through one matcher.
type replay struct {
	w         *world
	m         matcher
	idx, runs int
	rules     ledger.Rules

	now     int64
	events  minheap.Heap[event]
	seq     uint64
	arrival int // next job of w.jobs to arrive
	live    []*liveJob
	nodes   []*nodeState
	leases  map[string]*lease
	leaseNo int64

	queue    [3][]*liveJob // by tier (or all in [0] when !byTier), by arrival
	queued   [3]int
	fresh    []*liveJob
	gen      uint64 // bumps whenever capacity may have freed up
	fullGen  uint64 // gen at the last pass that tried every queued job
	fullAt   int64
	lastPass int64
	ticking  bool
	dirty    []*nodeState
	fails    map[domKey][]failure
	retry    int64

	met      *Metrics
	used     []int64 // GPU-seconds leased per sample bin
	binPrice map[string][]idlegrid.Micros
	heap     heapSampler
}

func newReplay(w *world, m matcher, idx, runs int) *replay {
	r := &replay{
		w: w, m: m, idx: idx, runs: runs,
		rules:    ledger.Rules{FeeBasisPoints: w.cfg.FeeBasisPoints},
		live:     make([]*liveJob, len(w.jobs)),
		leases:   map[string]*lease{},
		fails:    map[domKey][]failure{},
		used:     make([]int64, len(w.offeredBins)),
		binPrice: map[string][]idlegrid.Micros{},
		retry:    max(1, int64(w.cfg.RetryEvery/time.Second)),
	}
	r.nodes = make([]*nodeState, len(w.nodes))
	for i, n := range w.nodes {
		r.nodes[i] = &nodeState{n: n, completed: n.histCompleted, failed: n.histFailed}
	}
	r.met = newMetrics(w, m)
	return r
}

func (r *replay) push(e event) {
	r.seq++
	e.seq = r.seq
	r.events.Push(e)
}

// run replays the world and returns what it measured.
func (r *replay) run(ctx context.Context) (*Metrics, error) {
	began := time.Now()
	lastReport := began
	r.now, r.lastPass, r.fullAt = r.w.start, r.w.start-1, r.w.start
	r.m.start(r)
	r.push(event{at: r.w.start + r.w.binSeconds, kind: evSample})
	r.push(event{at: r.w.start + max(1, int64(r.w.cfg.RecordEvery/time.Second)), kind: evRecords})
	r.push(event{at: r.w.start + republishEvery, kind: evDaily})
	if r.m.wantsWindows() {
		for _, ns := range r.nodes {
			r.push(event{at: ns.n.windows[0].start, kind: evWinOpen, n: ns})
		}
	}
	r.heap.sample()
	for i := 0; ; i++ {
		t := r.nextTime()
		if t >= r.w.end {
			break
		}
		r.now = t
		r.step(t)
		r.pass(t)
		if i%1024 == 0 && time.Since(lastReport) >= 250*time.Millisecond {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			lastReport = time.Now()
			r.heap.sample()
			r.report(time.Since(began))
		}
	}
	r.now = r.w.end
	r.finish()
	r.heap.sample()
	r.met.Wall = time.Since(began)
	r.met.PeakHeapBytes = r.heap.peak
	r.report(r.met.Wall)
	return r.met, nil
}

func (r *replay) report(wall time.Duration) {
	if r.w.cfg.Progress == nil {
		return
	}
	r.w.cfg.Progress(Progress{
		Run: r.met.Name, Index: r.idx, Of: r.runs,
		Done:    float64(r.now-r.w.start) / float64(r.w.end-r.w.start),
		Virtual: time.Unix(r.now, 0).UTC(), Jobs: r.arrival, Placements: r.met.Placements,
		Queued: r.queued[0] + r.queued[1] + r.queued[2], Wall: wall,
	})
}

// republishEvery is how often nodes publish their upcoming windows to the
// engine, as agents refresh their one-off windows.
const republishEvery = 24 * 3600

// nextTime is when something next happens.
func (r *replay) nextTime() int64 {
	t := int64(math.MaxInt64)
	if r.arrival < len(r.w.jobs) {
		t = r.w.jobs[r.arrival].submit
	}
	if len(r.events) > 0 {
		t = min(t, r.events[0].at)
	}
	if ne := r.m.nextEvent(); ne > 0 {
		t = min(t, max(ne, r.now+1))
	}
	return t
}

// step applies what happens at t: events, then arrivals.
func (r *replay) step(t int64) {
	for len(r.events) > 0 && r.events[0].at <= t {
		r.handle(r.events.Pop())
	}
	for r.arrival < len(r.w.jobs) && r.w.jobs[r.arrival].submit <= t {
		r.arrive(int32(r.arrival), t)
		r.arrival++
	}
}

func (r *replay) handle(e event) {
	switch e.kind {
	case evEnd:
		if !e.l.done {
			r.endLease(e.l, endCompleted, e.at)
		}
	case evFail:
		if !e.l.done {
			r.endLease(e.l, endFailed, e.at)
		}
	case evStop:
		if !e.l.done {
			r.endLease(e.l, endStopped, e.at)
		}
	case evCheckpoint:
		if !e.l.done {
			r.m.checkpoint(e.l, e.at)
			if next := e.at + int64(e.l.job.spec.ckpt); next < e.l.end {
				r.push(event{at: next, kind: evCheckpoint, l: e.l})
			}
		}
	case evDeadline:
		if j := r.live[e.job]; j != nil && j.queued && j.qgen == e.gen {
			r.abandon(j)
		}
	case evSample:
		r.sample(e.at)
		if next := e.at + r.w.binSeconds; next < r.w.end+r.w.binSeconds {
			r.push(event{at: next, kind: evSample})
		}
	case evTick:
		r.ticking = false
	case evRecords:
		if len(r.dirty) > 0 {
			r.m.recordsChanged(r.dirty)
			for _, ns := range r.dirty {
				ns.dirty = false
			}
			r.dirty = r.dirty[:0]
			r.gen++
		}
		r.push(event{at: e.at + max(1, int64(r.w.cfg.RecordEvery/time.Second)), kind: evRecords})
	case evDaily:
		r.m.republish(e.at)
		r.gen++
		r.push(event{at: e.at + republishEvery, kind: evDaily})
	case evWinOpen:
		e.n.open = true
		r.m.windowOpened(e.n, e.n.win)
		r.gen++
		r.push(event{at: e.n.n.windows[e.n.win].end, kind: evWinClose, n: e.n})
	case evWinClose:
		e.n.open = false
		r.m.windowClosed(e.n)
		if e.n.win++; e.n.win < len(e.n.n.windows) {
			r.push(event{at: e.n.n.windows[e.n.win].start, kind: evWinOpen, n: e.n})
		}
	}
}

// arrive makes job i live and queues it.
func (r *replay) arrive(i int32, t int64) {
	spec := &r.w.jobs[i]
	j := &liveJob{idx: i, spec: spec, remaining: int64(spec.dur), arrived: t}
	r.live[i] = j
	r.met.arrived(j)
	r.enqueue(j, t)
}

// enqueue puts j in the queue, in arrival order, and gives it a deadline.
func (r *replay) enqueue(j *liveJob, t int64) {
	j.queued, j.tried = true, false
	j.qgen++
	q := r.tierQueue(j)
	// A requeued job may still hold its old slot, not yet compacted.
	if k, found := slices.BinarySearchFunc(r.queue[q], j.idx, func(x *liveJob, idx int32) int { return int(x.idx - idx) }); !found {
		r.queue[q] = slices.Insert(r.queue[q], k, j)
	}
	r.queued[j.spec.tier]++
	r.fresh = append(r.fresh, j)
	r.m.queued(j)
	r.push(event{at: t + int64(r.w.cfg.Patience/time.Second), kind: evDeadline, job: j.idx, gen: j.qgen})
}

func (r *replay) tierQueue(j *liveJob) int {
	if r.m.byTier() {
		return int(j.spec.tier)
	}
	return 0
}

// dequeue takes j out of the queue (the slot is compacted at the next
// full pass).
func (r *replay) dequeue(j *liveJob) {
	if j.queued {
		j.queued = false
		r.queued[j.spec.tier]--
	}
}

// abandon gives up on a job whose renter's patience ran out.
func (r *replay) abandon(j *liveJob) {
	r.dequeue(j)
	r.m.forget(j)
	r.met.gaveUp(j)
	r.live[j.idx] = nil
}

// pass gives the notices the matcher asks for, then tries the queued jobs.
// When nothing freed capacity since the last full pass, and no retry is
// due, only jobs that have not been tried are.
func (r *replay) pass(t int64) {
	for _, n := range r.m.advance(t) {
		if l := r.leases[n.leaseID]; l != nil {
			r.notice(l, n.stopAt, true)
		}
	}
	if r.w.opened(r.lastPass, t) {
		r.gen++
	}
	r.lastPass = t
	clear(r.fails)
	if r.gen != r.fullGen || t >= r.fullAt+r.retry {
		r.fullGen, r.fullAt = r.gen, t
		for q := range r.queue {
			kept := r.queue[q][:0]
			for _, j := range r.queue[q] {
				if !j.queued {
					continue
				}
				r.try(j, t)
				if j.queued {
					kept = append(kept, j)
				}
			}
			clear(r.queue[q][len(kept):])
			r.queue[q] = kept
		}
	} else if len(r.fresh) > 0 {
		slices.SortFunc(r.fresh, func(a, b *liveJob) int {
			if r.m.byTier() && a.spec.tier != b.spec.tier {
				return int(a.spec.tier) - int(b.spec.tier)
			}
			return int(a.idx - b.idx)
		})
		for _, j := range r.fresh {
			if j.queued && !j.tried {
				r.try(j, t)
			}
		}
	}
	clear(r.fresh)
	r.fresh = r.fresh[:0]
	if !r.ticking && r.queued[0]+r.queued[1]+r.queued[2] > 0 {
		r.ticking = true
		r.push(event{at: t + r.retry, kind: evTick})
	}
}

// domKey and failure let a pass skip a job when one it needs no less than
// could not start: same tier, models and region, and for bronze the same
// checkpoint interval (the engine lets bronze that checkpoints start in a
// window shorter than its run); no more GPUs, no longer run, and a cap no
// lower than the skipped job's. Within a pass the market only fills up,
// so the skipped job could not start either, unless GPUs are reserved
// for it. The replay's jobs differ in nothing else the engine reads.
type domKey struct {
	tier          int8
	models, place uint16
	ckpt          int32 // bronze only; 0 for gold and silver
}

func domKeyOf(j *liveJob) domKey {
	k := domKey{tier: j.spec.tier, models: j.spec.models, place: j.spec.region}
	if j.spec.tier == int8(idlegrid.TierBronze.Rank()) {
		k.ckpt = j.spec.ckpt
	}
	return k
}

type failure struct {
	gpus   int8
	dur    int64
	cap    idlegrid.Micros
	reason string
	// noEstimate: the matcher, asked in this pass when the failed job
	// should start, had no answer. It has none for a job the failure
	// dominates either: a node that could start the dominated job could
	// start the failed one no later.
	noEstimate bool
}

func (r *replay) dominated(j *liveJob) (*failure, bool) {
	if j.reserved {
		return nil, false // its reservation gives it GPUs no other job has
	}
	fs := r.fails[domKeyOf(j)]
	for i := range fs {
		if f := &fs[i]; j.spec.gpus >= f.gpus && j.remaining >= f.dur && j.spec.cap <= f.cap {
			return f, true
		}
	}
	return nil, false
}

// try asks the matcher about one queued job and carries out its answer.
func (r *replay) try(j *liveJob, t int64) {
	j.tried = true
	if f, ok := r.dominated(j); ok {
		j.reason = f.reason
		r.met.Skipped++
		r.askEstimate(j, t, f.noEstimate)
		return
	}
	began := time.Now()
	d := r.m.place(j, t)
	if len(d.picks) > 0 {
		r.place(j, &d, t)
	} else {
		for _, id := range d.preempt {
			if l := r.leases[id]; l != nil && !l.noticed {
				r.notice(l, t+r.noticeSeconds(), false)
			}
		}
		r.m.commit(j, &d, t)
	}
	r.met.placeTime(time.Since(began), len(d.picks) > 0)
	j.reserved = d.reserved
	if len(d.picks) == 0 {
		j.reason = d.reason
		none := r.askEstimate(j, t, false)
		k := domKeyOf(j)
		r.fails[k] = append(r.fails[k], failure{j.spec.gpus, j.remaining, j.spec.cap, d.reason, none})
	}
}

// askEstimate asks the matcher, the first time j waits, when j should
// start, as a renter running idlegrid job explain would; the answer is
// held up against the start the replay then gives it. A job waits from
// the first pass that does not start it, whether the matcher was asked
// or the pass skipped it as dominated. With knownNone, the answer is known
// to be none: a job that dominates j had none in this pass, and asking
// again would read every node for nothing. It reports whether it asked
// now and had no answer.
func (r *replay) askEstimate(j *liveJob, t int64, knownNone bool) bool {
	est, ok := r.m.(estimator)
	if !ok || j.asked || j.started {
		return false
	}
	j.asked = true
	if !knownNone {
		j.estimate = est.estimateStart(j, t)
	}
	r.met.askedEstimate(j)
	return j.estimate == 0
}

func (r *replay) noticeSeconds() int64 {
	if s := r.w.cfg.Market.NoticeSeconds; s > 0 {
		return s
	}
	return defaultNoticeSeconds
}

// defaultNoticeSeconds is market.DefaultNoticeSeconds, for baselines
// that never give notice.
const defaultNoticeSeconds = 120

// place starts the leases of a placed job.
func (r *replay) place(j *liveJob, d *decision, t int64) {
	r.dequeue(j)
	var ls []*lease
	for _, p := range d.picks {
		ns := r.nodes[p.node]
		r.leaseNo++
		l := &lease{
			id: "l" + strconv.FormatInt(r.leaseNo, 36), job: j, node: ns, gpus: p.gpus, n: p.n,
			price: p.price, start: t, end: t + j.remaining,
		}
		r.leases[l.id] = l
		ns.used += l.n
		ls = append(ls, l)
		r.push(event{at: l.end, kind: evEnd, l: l})
		if at, ok := r.failureAt(l); ok {
			r.push(event{at: at, kind: evFail, l: l})
		}
		if ck := int64(j.spec.ckpt); ck > 0 && j.spec.tier == int8(idlegrid.TierBronze.Rank()) && t+ck < l.end {
			r.push(event{at: t + ck, kind: evCheckpoint, l: l})
		}
		r.met.priced(r, l)
	}
	r.m.commit(j, d, t)
	for _, l := range ls {
		r.m.leaseStarted(l)
	}
	j.running, j.leases = len(ls), ls
	if !j.started {
		j.started = true
		r.met.started(j, t, ls[0].price)
	}
}

// failureAt draws whether the lease fails by its node's true reliability,
// and when: the draw depends only on the job, its attempt and the node,
// so every run that makes the same placement sees the same failure.
func (r *replay) failureAt(l *lease) (int64, bool) {
	h := mix(r.w.cfg.Seed ^ uint64(l.job.idx)<<20 ^ uint64(l.job.attempts)<<52 ^ uint64(l.node.n.idx)*0x9e3779b97f4a7c15)
	if unit(h) >= 1-l.node.n.rel {
		return 0, false
	}
	at := l.start + 1 + int64(unit(mix(h))*float64(l.end-l.start-1))
	return at, at < l.end
}

// mix is SplitMix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// notice gives a bronze lease notice: it stops at stopAt unless it ends
// first.
func (r *replay) notice(l *lease, stopAt int64, windowEnd bool) {
	if l.done || l.noticed {
		return
	}
	l.noticed, l.stopAt, l.windowEnd = true, stopAt, windowEnd
	r.m.leaseNoticed(l)
	if stopAt < l.end {
		r.push(event{at: stopAt, kind: evStop, l: l})
	}
}

// How a lease ends.
const (
	endCompleted = iota
	endFailed    // the node failed it: the renter pays nothing
	endStopped   // stopped after notice: preempted, or its window ended
)

// lastCheckpoint is when the lease last saved its work, by t.
func (r *replay) lastCheckpoint(l *lease, t int64) int64 {
	ck := int64(l.job.spec.ckpt)
	if ck <= 0 {
		return l.start
	}
	return l.start + (t-l.start)/ck*ck
}

// endLease settles a lease that ended at t and moves its job on.
func (r *replay) endLease(l *lease, how int, t int64) {
	l.done = true
	delete(r.leases, l.id)
	ns, j := l.node, l.job
	ns.used -= l.n
	ran := t - l.start
	gpuSecs := ran * int64(l.n)
	fault := idlegrid.FaultNone
	if how == endFailed {
		fault = idlegrid.FaultProvider
	}
	charge := ledger.Charge(&idlegrid.Lease{PriceMicrosPerGPUHour: l.price, HoldMicros: ledger.HoldFor(l.price, l.n, l.end-l.start)}, gpuSecs, fault)
	useful := gpuSecs
	if how != endCompleted {
		useful = (r.lastCheckpoint(l, t) - l.start) * int64(l.n)
	}
	r.w.addBins(r.used, l.start, t, int64(l.n))
	j.charged += charge
	r.met.settled(r, l, how, gpuSecs, useful, charge, r.rules.Fee(charge))
	r.m.leaseEnded(l)
	r.gen++
	switch how {
	case endCompleted:
		ns.completed++
		r.markDirty(ns)
	case endFailed:
		ns.failed++
		r.markDirty(ns)
	}
	j.running--
	if how == endCompleted {
		if j.running == 0 {
			r.met.completed(j, t)
			r.live[j.idx] = nil
		}
		return
	}
	// A failed or stopped share of a job stops the whole job; it runs
	// again from its last checkpoint.
	for _, o := range j.leases {
		if !o.done {
			r.endLease(o, endStopped, t)
		}
	}
	if j.running == 0 && r.live[j.idx] == j && !j.queued {
		j.remaining -= (useful / int64(l.n))
		j.remaining = max(j.remaining, 1)
		j.attempts++
		r.enqueue(j, t)
	}
}

func (r *replay) markDirty(ns *nodeState) {
	if !ns.dirty {
		ns.dirty = true
		r.dirty = append(r.dirty, ns)
	}
}

// sample records the queue at the end of a bin, and the bin's clearing
// prices.
func (r *replay) sample(at int64) {
	b := int((at-r.w.start)/r.w.binSeconds) - 1
	if b < 0 || b >= len(r.used) {
		return
	}
	for t := range r.queued {
		r.met.QueueSeries[t][b] = int32(r.queued[t])
	}
	k := int(r.met.PriceBinSeconds / r.w.binSeconds)
	if (b+1)%k != 0 && b != len(r.used)-1 {
		return // prices are kept over wider bins, so that their medians are steady
	}
	for model, ps := range r.binPrice {
		if len(ps) == 0 {
			continue
		}
		s := r.met.PriceSeries[model]
		if s == nil {
			s = make([]idlegrid.Micros, (len(r.used)+k-1)/k)
			r.met.PriceSeries[model] = s
		}
		s[b/k] = medianMicros(ps)
		r.binPrice[model] = ps[:0]
	}
}

// finish settles what is still running at the end of the span, as if it
// stopped there, and counts the jobs still waiting.
func (r *replay) finish() {
	ls := make([]*lease, 0, len(r.leases))
	for _, l := range r.leases {
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b *lease) int { return int(a.start - b.start) })
	for _, l := range ls {
		gpuSecs := (r.w.end - l.start) * int64(l.n)
		charge := idlegrid.CostOf(l.price, gpuSecs)
		l.job.charged += charge
		r.w.addBins(r.used, l.start, r.w.end, int64(l.n))
		r.met.settled(r, l, endCompleted, gpuSecs, gpuSecs, charge, r.rules.Fee(charge))
		r.met.RunningAtEnd++
	}
	r.sample(r.w.start + int64(len(r.used))*r.w.binSeconds)
	for _, j := range r.live {
		if j != nil && j.queued {
			r.met.waitingAtEnd(j)
		}
	}
	r.met.finish(r)
}
