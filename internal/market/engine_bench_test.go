package market_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/cputime"
	"github.com/idlegrid/idlegrid/internal/market"
)

// BenchmarkPlace measures the engine's placement loop on a market of n
// nodes with mixed models, regions, windows, time zones, asks and cached
// data, about 80% busy. One placement is what the coordinator does per
// job: Place; Commit; and when placed AddLease for its leases. The oldest
// leases are then ended (RemoveLease) to hold the market at 80% of the
// open nodes' GPUs, and the clock moves 10ms per placement, with an
// Advance every 1,000. The 4,096 jobs cycle; a job that waits keeps the
// reservation its Commit recorded, as in the coordinator.
//
// The naive sub-benchmarks run the same jobs through FirstMatcher over a
// Snapshot of the same market: a full scan of every node, with no state
// to keep (so no Commit).
//
// Both collect the setup's garbage before the loop, and report the CPU
// time the loop used per placement (cpu-µs/op) beside the wall-clock
// placements/s and p99: on a machine shared with other work, the wall
// clock also counts the time the others ran. The engine's also reports
// the share of placements priced against a shadow runner-up (shadow-%)
// and their median latency (shadow-p50-µs).
//
// Run: go test -run '^$' -bench BenchmarkPlace -benchtime 200000x ./internal/market
func BenchmarkPlace(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchEngine(b, n, benchOptions{}) })
	}
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("naive/nodes=%d", n), func(b *testing.B) { benchNaive(b, n) })
	}
}

var (
	benchModels  = []string{"H100-80GB", "A100-80GB", "A100-40GB", "L40S", "RTX4090"}
	benchVRAM    = []int{81920, 81920, 40960, 49152, 24576}
	benchPrice   = []idlegrid.Micros{2_500_000, 1_800_000, 1_200_000, 900_000, 500_000}
	benchRegions = []string{"us-east", "us-west", "eu-west", "eu-north", "ap-south", "ap-east"}
	benchResid   = []string{"US", "US", "EU", "EU", "IN", "JP"}
	benchZones   = []string{"America/New_York", "America/Los_Angeles", "Europe/Paris", "Europe/Stockholm", "Asia/Kolkata", "Asia/Tokyo"}
	benchData    = []string{"imagenet", "laion-400m", "c4", "the-stack"}
)

// placeMarket is a market and the leases that keep it 80% busy.
type placeMarket struct {
	nodes  []*idlegrid.Node
	leases []*idlegrid.Lease
	byID   map[string]int // index of nodes by ID, built by restand
	jobs   []*idlegrid.Job
}

func newPlaceMarket(n int) *placeMarket {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	m := &placeMarket{}
	for i := range n {
		m.nodes = append(m.nodes, benchNode(r, fmt.Sprintf("node-%06d", i)))
	}
	seq := 0
	for _, nd := range m.nodes {
		if nd.Schedule.AvailableUntil(now).IsZero() {
			continue // closed nodes hold no leases, or free capacity would drift to them
		}
		for g := 0; g < len(nd.GPUs); {
			k := 1 + r.IntN(len(nd.GPUs)-g)
			if r.IntN(100) >= 80 { // leave these free
				g += k
				continue
			}
			seq++
			m.leases = append(m.leases, benchLease(r, fmt.Sprintf("lease-%07d", seq), nd, nd.GPUs[g:g+k]))
			g += k
		}
	}
	for i := range 4096 {
		m.jobs = append(m.jobs, benchJob(r, fmt.Sprintf("job-%05d", i)))
	}
	return m
}

func benchNode(r *rand.Rand, id string) *idlegrid.Node {
	mi, ri := r.IntN(len(benchModels)), r.IntN(len(benchRegions))
	gpus := []int{1, 2, 4, 4, 8, 8}[r.IntN(6)]
	// Ten nodes to a provider, from the ID so the draws, and the market,
	// stay as they were: the shadow runner-up passes over a winner's own
	// provider's nodes, and a market of one provider would be all of them.
	n := &idlegrid.Node{ID: id, ProviderID: "prov-" + id[len(id)-6:len(id)-1], State: idlegrid.NodeOnline,
		Reliability: idlegrid.ReliabilityOf(int64(r.IntN(200)), int64(r.IntN(12)))}
	n.Name, n.CPUCores, n.RAMMB = id, 8*gpus, 64000*gpus
	n.Region, n.Residency = benchRegions[ri], benchResid[ri]
	for g := range gpus {
		n.GPUs = append(n.GPUs, idlegrid.GPU{UUID: fmt.Sprintf("%s-gpu-%d", id, g), Model: benchModels[mi], VRAMMB: benchVRAM[mi]})
	}
	silver := benchPrice[mi] * idlegrid.Micros(70+r.IntN(60)) / 100
	n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: silver, idlegrid.TierBronze: silver / 2}
	if r.IntN(10) > 0 {
		n.Ask.FloorMicrosPerGPUHour[idlegrid.TierGold] = silver * 13 / 10
	}
	if r.IntN(7) == 0 {
		n.Ask.AllowedKinds = []idlegrid.WorkloadKind{idlegrid.KindInference, idlegrid.KindEval}
	}
	if r.IntN(10) == 0 {
		n.Ask.MaxJobSeconds = 4 * 3600
	}
	n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways, TimeZone: benchZones[ri]}
	if r.IntN(5) < 2 { // evenings and nights, or office hours, local time
		n.Schedule.Mode = idlegrid.ScheduleWindows
		days := []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
		n.Schedule.Weekly = []idlegrid.WeeklyWindow{
			{Days: days, Start: "18:00", End: "08:00"},
			{Days: days, Start: "09:00", End: "17:00"},
		}[r.IntN(2):][:1]
	}
	if r.IntN(5) == 0 {
		n.Ask.TimeOfDay = []idlegrid.PriceWindow{{Start: "09:00", End: "18:00", MultiplierPercent: 130}}
	}
	if r.IntN(10) == 0 {
		n.CachedDatasets = []string{benchData[r.IntN(len(benchData))]}
	}
	return n
}

func benchLease(r *rand.Rand, id string, n *idlegrid.Node, gpus []idlegrid.GPU) *idlegrid.Lease {
	started := now.Add(-time.Duration(r.IntN(6*3600)) * time.Second)
	l := &idlegrid.Lease{ID: id, JobID: "j" + id, NodeID: n.ID, Tier: idlegrid.Tiers[r.IntN(3)], State: idlegrid.LeaseRunning,
		CreatedAt: started, StartedAt: &started, LimitSeconds: int64(7+r.IntN(12)) * 3600}
	for _, g := range gpus {
		l.GPUUUIDs = append(l.GPUUUIDs, g.UUID)
	}
	return l
}

func benchJob(r *rand.Rand, id string) *idlegrid.Job {
	j := &idlegrid.Job{ID: id, RenterID: "renter", State: idlegrid.JobQueued, JobSpec: idlegrid.JobSpec{
		Kind:  []idlegrid.WorkloadKind{idlegrid.KindTraining, idlegrid.KindFineTune, idlegrid.KindInference, idlegrid.KindEval}[r.IntN(4)],
		Image: "ghcr.io/acme/job:1", GPUs: []int{1, 1, 1, 1, 2, 2, 4, 4, 8}[r.IntN(9)], Nodes: 1,
		Tier:                     []idlegrid.Tier{idlegrid.TierGold, idlegrid.TierSilver, idlegrid.TierSilver, idlegrid.TierBronze, idlegrid.TierBronze}[r.IntN(5)],
		MaxPriceMicrosPerGPUHour: idlegrid.Micros(2+r.IntN(5)) * 1_000_000,
		DurationSeconds:          int64(15+r.IntN(8*60)) * 60,
	}}
	if j.Tier == idlegrid.TierBronze && j.DurationSeconds%120 == 0 { // half of bronze resumes, from the draws made
		j.CheckpointEverySeconds = 1800
	}
	if r.IntN(20) == 0 {
		j.Nodes = 2 + r.IntN(3)
	}
	switch x := r.IntN(10); {
	case x < 5:
		j.GPUModels = []string{benchModels[r.IntN(len(benchModels))]}
	case x < 7:
		j.GPUModels = []string{benchModels[r.IntN(2)], benchModels[2+r.IntN(3)]}
	}
	if r.IntN(5) == 0 {
		j.MinVRAMMB = 40960
	}
	switch x := r.IntN(20); {
	case x < 6:
		j.Region = benchRegions[r.IntN(len(benchRegions))]
	case x < 9:
		j.Region, j.RegionPreferred = benchRegions[r.IntN(len(benchRegions))], true
	}
	if r.IntN(10) == 0 {
		j.Residency = "EU"
	}
	switch r.IntN(7) {
	case 0:
		j.ReliabilityWeight = 2
	case 1:
		j.ReliabilityWeight = 0.5
	}
	if r.IntN(10) == 0 {
		j.Datasets = []idlegrid.Dataset{{Name: benchData[r.IntN(len(benchData))], SizeGB: int64(200 + r.IntN(2000))}}
	}
	j.Interruptible = j.Tier == idlegrid.TierBronze
	return j
}

// placedLease is the running lease the coordinator would store for pick p
// of job j, the seq-th of the benchmark.
func placedLease(j *idlegrid.Job, p market.Pick, seq int, at time.Time) *idlegrid.Lease {
	return fillLease(&idlegrid.Lease{}, j, p, seq, at)
}

// fillLease makes l, whose record the engine no longer holds, placedLease's
// lease, reusing its GPU list and start time.
func fillLease(l *idlegrid.Lease, j *idlegrid.Job, p market.Pick, seq int, at time.Time) *idlegrid.Lease {
	started, uuids := l.StartedAt, l.GPUUUIDs[:0]
	if started == nil {
		started = new(time.Time)
	}
	*started = at
	*l = idlegrid.Lease{ID: "bench-" + strconv.Itoa(seq), JobID: j.ID, NodeID: p.Node.ID,
		Tier: j.Tier, State: idlegrid.LeaseRunning, CreatedAt: at, StartedAt: started, LimitSeconds: j.DurationSeconds}
	for _, g := range p.GPUs {
		uuids = append(uuids, g.UUID)
	}
	l.GPUUUIDs = uuids
	return l
}

// liveLeases are the benchmark's running leases, oldest first. The records
// of those that ended are reused for new ones (the engine keeps none of a
// lease's record), so that the loop measures the engine rather than the
// coordinator building its records.
type liveLeases struct {
	fifo  []*idlegrid.Lease
	head  int // fifo[head:] are live
	spare []*idlegrid.Lease
}

func (q *liveLeases) len() int                { return len(q.fifo) - q.head }
func (q *liveLeases) oldest() *idlegrid.Lease { return q.fifo[q.head] }

// add records the lease for pick p of job j.
func (q *liveLeases) add(j *idlegrid.Job, p market.Pick, seq int, at time.Time) *idlegrid.Lease {
	var l *idlegrid.Lease
	if k := len(q.spare); k > 0 {
		l, q.spare = q.spare[k-1], q.spare[:k-1]
	} else {
		l = &idlegrid.Lease{}
	}
	fillLease(l, j, p, seq, at)
	if q.head > 0 && len(q.fifo) == cap(q.fifo) { // slide down rather than grow
		q.fifo = q.fifo[:copy(q.fifo, q.fifo[q.head:])]
		q.head = 0
	}
	q.fifo = append(q.fifo, l)
	return l
}

// end drops the oldest lease, for reuse once the engine has forgotten it.
func (q *liveLeases) end() {
	q.spare = append(q.spare, q.fifo[q.head])
	q.fifo[q.head] = nil
	q.head++
}

// latencies collects one sample per placement and reports the metrics.
type latencies []time.Duration

// report reports placements/s, p99-µs and waited-%, and cpu-µs/op: the
// CPU time the loop used since cpu0 (the process's, the garbage
// collector's included) per placement. On a shared machine wall time also
// counts the time other work ran; CPU time much less so.
func (l latencies) report(b *testing.B, waited int, cpu0 time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "placements/s")
	if cpu1, ok := cputime.Process(); ok && b.N > 0 {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/op")
	}
	slices.Sort(l)
	if len(l) > 0 {
		b.ReportMetric(float64(l[len(l)*99/100].Nanoseconds())/1000, "p99-µs")
	}
	b.ReportMetric(100*float64(waited)/float64(max(b.N, 1)), "waited-%")
}

// restand returns node id's record after the i-th placement ended one of
// its leases: its reliability a step nearer 1, or one time in twenty a
// step down, as a reputation moves; it keeps the record for the next.
func (m *placeMarket) restand(id string, i int) *idlegrid.Node {
	if m.byID == nil {
		m.byID = make(map[string]int, len(m.nodes))
		for k, n := range m.nodes {
			m.byID[n.ID] = k
		}
	}
	k := m.byID[id]
	n := *m.nodes[k]
	if i%20 == 0 {
		n.Reliability *= 0.98
	} else {
		n.Reliability += (1 - n.Reliability) / 50
	}
	m.nodes[k] = &n
	return &n
}

// loadedEngine returns an engine holding m's nodes and leases, the leases
// oldest first, and the GPUs they hold.
func loadedEngine(m *placeMarket) (*market.Engine, []*idlegrid.Lease, int) {
	e := market.NewEngine(market.Config{})
	e.Advance(now)
	for _, nd := range m.nodes {
		e.UpsertNode(nd)
	}
	held := 0
	var fifo []*idlegrid.Lease
	for _, l := range m.leases {
		e.AddLease(l)
		held += len(l.GPUUUIDs)
		fifo = append(fifo, l)
	}
	return e, fifo, held
}

// BenchmarkPlaceChurn is BenchmarkPlace at 100,000 nodes where, as in the
// coordinator, every lease that ends moves its node's reputation: the
// node is upserted with its reliability a step nearer 1 (or, one time in
// twenty, a failure, a step down), its offer unchanged. One in twenty is
// about the failure share of the market's own records (ReliabilityOf of
// up to 200 completions and 12 failures), so reliabilities hover near
// 0.95, and the nodes near the gold bar (0.9) cross it now and then.
//
//	go test -run '^$' -bench PlaceChurn -benchtime 3s ./internal/market
func BenchmarkPlaceChurn(b *testing.B) {
	benchEngine(b, 100_000, benchOptions{churn: true})
}

// benchOptions vary BenchmarkPlace's loop.
type benchOptions struct {
	// observe, when not nil, is told each placement's job, decision,
	// whether it ran the periodic Advance, the market time it was made at,
	// and its latency.
	observe func(j *idlegrid.Job, d market.Decision, advanced bool, at time.Time, took time.Duration)
	// churn upserts the node of every lease that ends with a new
	// reliability (BenchmarkPlaceChurn).
	churn bool
}

// placeLoop is BenchmarkPlace's loop: the market, the engine that holds
// it, and the leases placed and not yet ended.
type placeLoop struct {
	m            *placeMarket
	e            *market.Engine
	live         *liveLeases
	held, target int // GPUs leases hold, and what the loop holds them at
	clock        time.Time
	seq, waited  int
	clockStep    time.Duration // how far each Advance moves the clock; 10 s (10 ms a placement) unless set
	churn        bool
	notices      []market.Notice   // the last step's Advance's
	placed       []*idlegrid.Lease // the last step's leases
	// lap, when set, is called after each part of a step with its kind
	// (0 the Advance, 1 Place, 2 Commit, 3 AddLease, 4 RemoveLease), and
	// with -1 at the start of a step and after the loop's own work
	// (building the leases), which no kind counts.
	lap func(kind int)
}

// newPlaceLoop builds the loop's market of n nodes and its engine, the
// index built.
func newPlaceLoop(n int, churn bool) *placeLoop {
	m := newPlaceMarket(n)
	e, loaded, held := loadedEngine(m)
	l := &placeLoop{m: m, e: e, live: &liveLeases{fifo: slices.Grow(loaded, len(loaded))}, held: held, target: held, clock: now, clockStep: 10 * time.Second, churn: churn}
	e.Advance(l.clock) // the start of a pass: builds the index
	return l
}

// step makes the loop's i-th placement, as the coordinator would: an
// Advance of clockStep every 1,000 (advanced), the job's Place, Commit and
// leases, and the oldest leases ended to hold the market where it was.
func (l *placeLoop) step(i int) (j *idlegrid.Job, d market.Decision, advanced bool) {
	e, lap := l.e, l.lap
	if lap == nil {
		lap = func(int) {}
	}
	lap(-1)
	l.notices = l.notices[:0]
	if advanced = i%1000 == 0; advanced {
		l.clock = l.clock.Add(l.clockStep)
		l.notices = e.Advance(l.clock)
	}
	lap(0)
	j = l.m.jobs[i%len(l.m.jobs)]
	d = e.Place(j, l.clock)
	lap(1)
	e.Commit(j, d, l.clock) // when it waits, a reservation or notices, as the coordinator stores them
	lap(2)
	if !d.Placed() {
		l.waited++
	}
	l.placed = l.placed[:0]
	for _, p := range d.Picks {
		l.seq++
		l.placed = append(l.placed, l.live.add(j, p, l.seq, l.clock))
	}
	lap(-1)
	for _, lease := range l.placed {
		e.AddLease(lease)
		l.held += len(lease.GPUUUIDs)
	}
	lap(3)
	for l.held > l.target && l.live.len() > 0 {
		old := l.live.oldest()
		e.RemoveLease(old.ID)
		if l.churn {
			e.UpsertNode(l.m.restand(old.NodeID, i))
		}
		l.held -= len(old.GPUUUIDs)
		l.live.end()
	}
	lap(4)
	return j, d, advanced
}

// benchEngine runs BenchmarkPlace's loop on n nodes.
func benchEngine(b *testing.B, n int, o benchOptions) {
	l := newPlaceLoop(n, o.churn)
	lat := make(latencies, 0, 1<<20)
	var shadowLat latencies // placements priced against a shadow runner-up
	runtime.GC()            // collect the setup's garbage outside the loop's time
	cpu0, _ := cputime.Process()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		j, d, advanced := l.step(i)
		lat = append(lat, time.Since(t0))
		if o.observe != nil {
			o.observe(j, d, advanced, l.clock, lat[len(lat)-1])
		}
		if d.Placed() && d.Picks[0].ShadowRunnerUp {
			shadowLat = append(shadowLat, lat[len(lat)-1])
		}
	}
	lat.report(b, l.waited, cpu0)
	shadowLat.reportShadow(b)
}

// reportShadow reports the share of placements priced against a shadow
// runner-up (shadow-%) and their median latency (shadow-p50-µs).
func (l latencies) reportShadow(b *testing.B) {
	b.ReportMetric(100*float64(len(l))/float64(max(b.N, 1)), "shadow-%")
	if len(l) > 0 {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Nanoseconds())/1000, "shadow-p50-µs")
	}
}

func benchNaive(b *testing.B, n int) {
	m := newPlaceMarket(n)
	held := map[string]bool{}
	for _, l := range m.leases {
		for _, u := range l.GPUUUIDs {
			held[u] = true
		}
	}
	s := &market.Snapshot{Now: now}
	for _, nd := range m.nodes {
		v := &market.NodeView{Node: nd, AvailableUntil: nd.Schedule.AvailableUntil(now)}
		for _, g := range nd.GPUs {
			if !held[g.UUID] {
				v.FreeGPUs = append(v.FreeGPUs, g)
			}
		}
		s.Nodes = append(s.Nodes, v)
	}
	fm := market.NewFirstMatcher()
	lat := make(latencies, 0, 1<<16)
	waited := 0
	runtime.GC()
	cpu0, _ := cputime.Process()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if d := fm.Place(m.jobs[i%len(m.jobs)], s); !d.Placed() {
			waited++
		}
		lat = append(lat, time.Since(t0))
	}
	lat.report(b, waited, cpu0)
}

// BenchmarkNodesFree measures the API's search for nodes with free GPUs
// now (Engine.NodesFree) on BenchmarkPlace's 100,000-node market, 80%
// busy: any node, then with a GPU model and two regions. Beside it,
// FreeNow for a page of 1,000 nodes, which every node list asks, and as
// the baseline FreeNow for every node (scan). All run on the scheduler's
// goroutine, between placements.
//
//	go test -run '^$' -bench NodesFree ./internal/market
func BenchmarkNodesFree(b *testing.B) {
	m := newPlaceMarket(100_000)
	e, _, _ := loadedEngine(m)
	page := make([]string, 1000)
	for i := range page {
		page[i] = m.nodes[i*len(m.nodes)/len(page)].ID
	}
	for _, f := range []idlegrid.NodeFilter{
		{MinFreeGPUs: 1}, {MinFreeGPUs: 4}, {MinFreeGPUs: 8},
		{MinFreeGPUs: 1, GPUModels: []string{"H100-80GB"}, Regions: []string{"eu-west", "eu-north"}},
	} {
		name := fmt.Sprintf("at-least=%d", f.MinFreeGPUs)
		if f.GPUModels != nil {
			name += "/model,region"
		}
		b.Run(name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				n = len(e.NodesFree(f, now))
			}
			b.ReportMetric(float64(n), "nodes")
		})
	}
	b.Run("page", func(b *testing.B) {
		for b.Loop() {
			if len(e.FreeNow(page, now)) == 0 {
				b.Fatal("no node of the page is held")
			}
		}
	})
	all := make([]string, len(m.nodes))
	for i, n := range m.nodes {
		all[i] = n.ID
	}
	b.Run("scan/at-least=1", func(b *testing.B) { // the baseline: every node's FreeNow
		n := 0
		for b.Loop() {
			n = 0
			for _, free := range e.FreeNow(all, now) {
				if free >= 1 {
					n++
				}
			}
		}
		b.ReportMetric(float64(n), "nodes")
	})
}
