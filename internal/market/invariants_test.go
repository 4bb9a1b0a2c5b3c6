package market_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// TestEngine_randomRun drives the engine as a coordinator would, through a
// long random run of arrivals, placements, finishes, notices, window
// changes, re-offers and outages, and after every step checks:
//
//   - no GPU is assigned twice, and picks use free GPUs of online nodes;
//   - only bronze is ever preempted (gold and silver never), and only
//     leases older than the minimum runtime;
//   - notice always comes before a bronze stop: no lease is stopped less
//     than NoticeSeconds after its notice, and a bronze lease that would
//     outlive its node's window (by the end its placement promised) has
//     notice before the window ends;
//   - every price is at least the node's ask and at most the renter's cap;
//   - gold and silver leases sit in windows that cover them;
//   - backfill never delays a reservation past what it first promised
//     (allowing for leases reaped up to one step late);
//   - the engine's own bookkeeping is consistent (Engine.Verify).
func TestEngine_randomRun(t *testing.T) {
	steps := 10000
	if testing.Short() {
		steps = 3000
	}
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			d := newDriver(t, rand.New(rand.NewPCG(seed, 99)))
			for i := range steps {
				d.step()
				if err := d.check(); err != nil {
					t.Fatalf("step %d (%s): %v", i, d.last, err)
				}
			}
			t.Logf("%s", d.stats)
			if d.stats.placed < steps/10 || d.stats.preempted == 0 || d.stats.reserved == 0 || d.stats.windowNotices == 0 || d.stats.gangs == 0 || d.stats.shadowed == 0 {
				t.Errorf("the run exercises too little: %s", d.stats)
			}
		})
	}
}

const maxStep = 60 * time.Second

type runStats struct {
	placed, gangs, preempted, reserved, windowNotices, stops int
	// shadowed counts picks priced by a shadow runner-up.
	shadowed int
}

func (s runStats) String() string {
	return fmt.Sprintf("placed %d (%d gangs), shadow-priced picks %d, preemptions %d, reservations %d, window notices %d, stops after notice %d",
		s.placed, s.gangs, s.shadowed, s.preempted, s.reserved, s.windowNotices, s.stops)
}

// promise is a reservation as first committed.
type promise struct {
	start time.Time
	nodes string
	gpus  int
}

type driver struct {
	t        *testing.T
	r        *rand.Rand
	e        *market.Engine
	cfg      market.Config
	now      time.Time
	nodes    map[string]*idlegrid.Node // online
	offline  map[string]*idlegrid.Node
	leases   map[string]*idlegrid.Lease
	stopAt   map[string]time.Time
	waiting  map[string]*idlegrid.Job
	reserved map[string]promise // job → its reservation
	resNode  map[string]string  // node → job whose reservation it holds
	seq      int
	last     string
	untils   map[string]time.Time // node → window end at now, cached until the clock moves
	stats    runStats
}

func newDriver(t *testing.T, r *rand.Rand) *driver {
	d := &driver{
		t: t, r: r, now: now, nodes: map[string]*idlegrid.Node{}, offline: map[string]*idlegrid.Node{},
		leases: map[string]*idlegrid.Lease{}, stopAt: map[string]time.Time{}, waiting: map[string]*idlegrid.Job{},
		reserved: map[string]promise{}, resNode: map[string]string{}, untils: map[string]time.Time{},
	}
	d.e = market.NewEngine(market.Config{})
	d.cfg = d.e.Config()
	d.e.Advance(d.now)
	for i := range 30 {
		n := d.randomNode(fmt.Sprintf("n%02d", i))
		d.nodes[n.ID] = n
		d.e.UpsertNode(n)
	}
	return d
}

func (d *driver) randomNode(id string) *idlegrid.Node {
	r := d.r
	model := refModels[r.IntN(len(refModels))]
	// Several providers, so that shadow runner-ups price some picks.
	n := &idlegrid.Node{ID: id, ProviderID: "p" + id[len(id)-1:], State: idlegrid.NodeOnline, Reliability: []float64{1, 0.95, 0.9, 0.7}[r.IntN(4)]}
	n.Name, n.CPUCores, n.RAMMB = id, 64, 512000
	n.Region = refRegions[r.IntN(2)]
	n.Residency = "EU"
	count, other := []int{1, 2, 4, 8}[r.IntN(4)], refModels[r.IntN(len(refModels))]
	mixed := r.IntN(6) == 0 // its second half of another model (or the same): reservations must hold the right GPUs
	for g := range count {
		m := model
		if mixed && g >= count/2 {
			m = other
		}
		n.GPUs = append(n.GPUs, idlegrid.GPU{UUID: fmt.Sprintf("%s-g%d", id, g), Model: m, VRAMMB: refVRAM[m]})
	}
	n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{
		idlegrid.TierGold: idlegrid.Micros(2+r.IntN(4)) * 500_000, idlegrid.TierSilver: idlegrid.Micros(2+r.IntN(3)) * 400_000,
		idlegrid.TierBronze: idlegrid.Micros(1+r.IntN(3)) * 300_000,
	}
	switch r.IntN(10) {
	case 0, 1, 2:
		n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, TimeZone: "Europe/Berlin",
			Weekly: []idlegrid.WeeklyWindow{{Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}, Start: "08:00", End: "20:00"}}}
	case 3, 4:
		for k := range 6 {
			start := now.Add(time.Duration(k*8+r.IntN(3)) * time.Hour)
			n.Schedule.OneOff = append(n.Schedule.OneOff, idlegrid.OneOffWindow{Start: start, End: start.Add(time.Duration(1+r.IntN(5)) * time.Hour)})
		}
		n.Schedule.Mode = idlegrid.ScheduleWindows
	default:
		n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
	}
	if r.IntN(4) == 0 {
		n.Ask.TimeOfDay = []idlegrid.PriceWindow{{Start: "18:00", End: "23:00", MultiplierPercent: 150}}
	}
	return n
}

func (d *driver) randomJob() *idlegrid.Job {
	r := d.r
	d.seq++
	j := &idlegrid.Job{ID: fmt.Sprintf("job%05d", d.seq), State: idlegrid.JobQueued, CreatedAt: d.now, JobSpec: idlegrid.JobSpec{
		Kind: idlegrid.KindTraining, Image: "x", GPUs: []int{1, 1, 2, 4}[r.IntN(4)], Nodes: 1,
		Tier:                     []idlegrid.Tier{idlegrid.TierGold, idlegrid.TierSilver, idlegrid.TierSilver, idlegrid.TierBronze, idlegrid.TierBronze}[r.IntN(5)],
		MaxPriceMicrosPerGPUHour: idlegrid.Micros(2+r.IntN(6)) * 500_000,
		DurationSeconds:          int64(10+r.IntN(170)) * 60,
		CheckpointEverySeconds:   []int64{0, 60, 1800}[r.IntN(3)],
	}}
	if r.IntN(8) == 0 {
		j.Nodes = 2 + r.IntN(2)
	}
	if r.IntN(4) == 0 {
		j.GPUModels = []string{refModels[r.IntN(len(refModels))]}
	}
	j.Interruptible = j.Tier == idlegrid.TierBronze
	return j
}

func (d *driver) step() {
	switch x := d.r.IntN(100); {
	case x < 35:
		j := d.randomJob()
		d.last = "new " + j.String()
		d.e.NoteQueued(j)
		d.handle(j)
	case x < 50:
		if j := d.pickWaiting(); j != nil {
			d.last = "retry " + j.String()
			d.handle(j)
		}
	case x < 58:
		if id := d.pickLease(); id != "" {
			d.last = "finish " + id
			d.endLease(id)
		}
	case x < 80:
		by := time.Duration(d.r.Int64N(int64(maxStep)))
		d.last = "advance " + by.String()
		d.advance(by)
	case x < 85:
		if id := d.pickNode(d.nodes); id != "" {
			d.last = "reputation " + id // a lease ended: the same offer, a new score (restand.go)
			n := *d.nodes[id]
			n.Reliability = []float64{1, 0.97, 0.92, 0.88, 0.7}[d.r.IntN(5)]
			d.nodes[id] = &n
			d.e.UpsertNode(&n)
		}
	case x < 86:
		if id := d.pickNode(d.nodes); id != "" {
			d.last = "hardware change " + id // a GPU swapped out: the offer comes first, then the lease on it fails
			n := *d.nodes[id]
			n.GPUs = slices.Clone(n.GPUs)
			g := d.r.IntN(len(n.GPUs))
			old := n.GPUs[g].UUID
			n.GPUs[g].UUID += "-swapped"
			d.nodes[id] = &n
			d.e.UpsertNode(&n)
			if err := d.e.Verify(); err != nil {
				d.fail("after the swap: %v", err)
			}
			for _, lid := range slices.Sorted(maps.Keys(d.leases)) {
				if l := d.leases[lid]; l.NodeID == id && slices.Contains(l.GPUUUIDs, old) {
					d.endLease(lid)
				}
			}
		}
	case x < 90:
		if id := d.pickNode(d.nodes); id != "" {
			d.last = "re-offer " + id
			n := *d.nodes[id]
			n.Ask.FloorMicrosPerGPUHour = maps.Clone(n.Ask.FloorMicrosPerGPUHour)
			n.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = idlegrid.Micros(2+d.r.IntN(3)) * 400_000
			n.Reliability = []float64{1, 0.95, 0.9, 0.7}[d.r.IntN(4)]
			d.nodes[id] = &n
			d.e.UpsertNode(&n)
		}
	case x < 93:
		if id := d.pickNode(d.nodes); id != "" {
			d.last = "offline " + id
			d.offline[id] = d.nodes[id]
			delete(d.nodes, id)
			d.e.RemoveNode(id)
			for lid, l := range d.leases {
				if l.NodeID == id {
					d.endLease(lid) // lost: the coordinator ends it
				}
			}
			if job, ok := d.resNode[id]; ok {
				d.forgetPromise(job) // the engine drops a reservation that loses a node
			}
		}
	case x < 96:
		if id := d.pickNode(d.offline); id != "" {
			d.last = "online " + id
			d.nodes[id] = d.offline[id]
			delete(d.offline, id)
			d.e.UpsertNode(d.nodes[id])
		}
	default:
		if j := d.pickWaiting(); j != nil {
			d.last = "cancel " + j.ID
			delete(d.waiting, j.ID)
			d.forgetPromise(j.ID)
			d.e.ForgetJob(j.ID)
		}
	}
}

func (d *driver) pickWaiting() *idlegrid.Job {
	ids := slices.Sorted(maps.Keys(d.waiting))
	if len(ids) == 0 {
		return nil
	}
	return d.waiting[ids[d.r.IntN(len(ids))]]
}

func (d *driver) pickLease() string {
	ids := slices.Sorted(maps.Keys(d.leases))
	if len(ids) == 0 {
		return ""
	}
	return ids[d.r.IntN(len(ids))]
}

func (d *driver) pickNode(m map[string]*idlegrid.Node) string {
	ids := slices.Sorted(maps.Keys(m))
	if len(ids) == 0 {
		return ""
	}
	return ids[d.r.IntN(len(ids))]
}

func (d *driver) fail(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s at %s: %s", d.last, d.now.Sub(now), fmt.Sprintf(format, args...))
}

// ask is a node's ask for a tier now, computed here from the offer.
func (d *driver) ask(n *idlegrid.Node, t idlegrid.Tier) idlegrid.Micros {
	floor := n.Ask.FloorMicrosPerGPUHour[t]
	if len(n.Ask.TimeOfDay) == 0 {
		return floor
	}
	h := d.now.In(time.UTC).Hour() // TimeOfDay windows here are in UTC: the node's zone is UTC or Berlin's schedule only
	if n.Schedule.TimeZone != "" {
		loc, _ := time.LoadLocation(n.Schedule.TimeZone)
		h = d.now.In(loc).Hour()
	}
	if h >= 18 && h < 23 {
		return floor * 150 / 100
	}
	return floor
}

func (d *driver) leaseEnd(l *idlegrid.Lease) time.Time {
	end := l.StartedAt.Add(time.Duration(l.LimitSeconds) * time.Second)
	if s, ok := d.stopAt[l.ID]; ok && s.Before(end) {
		return s
	}
	return end
}

func (d *driver) handle(j *idlegrid.Job) {
	dec := d.e.Place(j, d.now)
	switch {
	case dec.Placed():
		d.checkPicks(j, dec)
		d.e.Commit(j, dec, d.now)
		for _, p := range dec.Picks {
			started := d.now
			d.seq++
			l := &idlegrid.Lease{ID: fmt.Sprintf("lease%05d", d.seq), JobID: j.ID, NodeID: p.Node.ID, Tier: j.Tier,
				State: idlegrid.LeaseRunning, CreatedAt: d.now, StartedAt: &started, LimitSeconds: j.DurationSeconds,
				PriceMicrosPerGPUHour: p.PriceMicrosPerGPUHour}
			for _, g := range p.GPUs {
				l.GPUUUIDs = append(l.GPUUUIDs, g.UUID)
			}
			d.leases[l.ID] = l
			d.e.AddLease(l)
			d.checkEndBy(j, p, l.ID)
		}
		delete(d.waiting, j.ID)
		d.forgetPromise(j.ID)
		d.stats.placed++
		if j.Nodes > 1 {
			d.stats.gangs++
		}
	case dec.Reservation != nil:
		if j.Tier == idlegrid.TierBronze {
			d.fail("bronze job %s got a reservation", j.ID)
		}
		for _, p := range dec.Preemptions {
			l := d.leases[p.LeaseID]
			switch {
			case l == nil:
				d.fail("preempts unknown lease %s", p.LeaseID)
			case l.Tier != idlegrid.TierBronze:
				d.fail("preempts %s lease %s", l.Tier, l.ID)
			case d.now.Sub(*l.StartedAt) < time.Duration(d.cfg.MinRuntimeSeconds)*time.Second:
				d.fail("preempts lease %s after only %s", l.ID, d.now.Sub(*l.StartedAt))
			case l.NoticeAt != nil:
				d.fail("preempts lease %s, already under notice", l.ID)
			}
		}
		d.checkPromise(j, dec.Reservation)
		d.e.Commit(j, dec, d.now)
		for _, p := range dec.Preemptions {
			d.giveNotice(p.LeaseID, d.now, d.now.Add(time.Duration(p.NoticeSeconds)*time.Second))
			d.stats.preempted++
		}
		d.checkGangsNoticed(dec.Preemptions)
		if len(dec.Preemptions) == 0 {
			d.stats.reserved++
		}
		d.waiting[j.ID] = j
	default:
		if len(dec.Preemptions) > 0 {
			d.fail("preemptions without a reservation")
		}
		d.waiting[j.ID] = j
		if _, ok := d.reserved[j.ID]; ok {
			d.forgetPromise(j.ID) // the reservation was lost (its node went away)
		}
	}
}

// checkEndBy checks that the engine, asked by when a gold or silver lease
// just placed must end, agrees with its pick's StartBy less the job's run:
// the placement set the one, and the coordinator judges a late start by
// the other.
func (d *driver) checkEndBy(j *idlegrid.Job, p market.Pick, leaseID string) {
	if j.Tier == idlegrid.TierBronze {
		return
	}
	at, why, ok := d.e.EndBy(leaseID)
	var want time.Time
	if ok {
		want = at.Add(-time.Duration(j.DurationSeconds) * time.Second).Truncate(time.Second)
	}
	if !want.Equal(p.StartBy) {
		d.fail("lease %s of %s job %s on %s: start-by %s, but end-by %s (%s)",
			leaseID, j.Tier, j.ID, p.Node.ID, sinceStart(p.StartBy), sinceStart(at), why)
	}
}

// sinceStart is t after the run's start, or "none" for the zero time.
func sinceStart(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.Sub(now).String()
}

// checkGangsNoticed checks that a preemption stops a victim's gang whole:
// every lease of a victim's job is under notice (stopping one stops them
// all, and each is owed its notice).
func (d *driver) checkGangsNoticed(ps []market.Preemption) {
	for _, p := range ps {
		for _, l := range d.leases {
			if l.JobID == p.JobID && l.NoticeAt == nil {
				d.fail("preempts lease %s of job %s but gives its gang's lease %s no notice", p.LeaseID, p.JobID, l.ID)
			}
		}
	}
}

// checkPicks checks a placement against the driver's own view.
func (d *driver) checkPicks(j *idlegrid.Job, dec market.Decision) {
	held := map[string]string{}
	for _, l := range d.leases {
		for _, u := range l.GPUUUIDs {
			held[l.NodeID+"/"+u] = l.ID
		}
	}
	if len(dec.Picks) != max(j.Nodes, 1) {
		d.fail("%d picks for %d nodes", len(dec.Picks), j.Nodes)
	}
	for _, p := range dec.Picks {
		n := d.nodes[p.Node.ID]
		if n == nil {
			d.fail("picked offline node %s", p.Node.ID)
		}
		if p.Node.Region != dec.Picks[0].Node.Region {
			d.fail("gang spans regions")
		}
		if len(p.GPUs) != max(j.GPUs, 1) {
			d.fail("%d GPUs, want %d", len(p.GPUs), j.GPUs)
		}
		for _, g := range p.GPUs {
			if !slices.ContainsFunc(n.GPUs, func(x idlegrid.GPU) bool { return x.UUID == g.UUID }) {
				d.fail("GPU %s not on %s", g.UUID, n.ID)
			}
			if l, ok := held[n.ID+"/"+g.UUID]; ok {
				d.fail("GPU %s assigned twice: lease %s holds it", g.UUID, l)
			}
			held[n.ID+"/"+g.UUID] = j.ID
		}
		ask := d.ask(n, j.Tier)
		if p.AskMicrosPerGPUHour != ask {
			d.fail("%s: ask %s, the offer says %s", n.ID, p.AskMicrosPerGPUHour, ask)
		}
		if p.PriceMicrosPerGPUHour < ask || p.PriceMicrosPerGPUHour > j.MaxPriceMicrosPerGPUHour {
			d.fail("%s: price %s outside [ask %s, cap %s]", n.ID, p.PriceMicrosPerGPUHour, ask, j.MaxPriceMicrosPerGPUHour)
		}
		if p.ShadowRunnerUp {
			d.stats.shadowed++
		}
		until := d.until(n)
		need := time.Duration(j.DurationSeconds) * time.Second
		if ck := j.CheckpointEverySeconds; j.Tier == idlegrid.TierBronze && ck > 0 && j.Nodes <= 1 { // a gang resumes from zero
			need = min(need, time.Duration(max(ck, d.cfg.MinRuntimeSeconds)+d.cfg.NoticeSeconds)*time.Second)
		}
		if until.Before(d.now.Add(need)) {
			d.fail("%s: window ends at %s, the job needs %s", n.ID, until.Sub(now), need)
		}
		d.checkBackfill(j, n, p.GPUs)
	}
}

// checkBackfill checks that placing p's GPUs for job j on n does not
// delay another job's reservation there: at its start, enough GPUs the
// reserved job can use stay free.
func (d *driver) checkBackfill(j *idlegrid.Job, n *idlegrid.Node, picked []idlegrid.GPU) {
	owner, ok := d.resNode[n.ID]
	if !ok || owner == j.ID {
		return
	}
	p, rj := d.reserved[owner], d.waiting[owner]
	if !d.now.Add(time.Duration(j.DurationSeconds) * time.Second).After(p.start) {
		return // it finishes before the reservation starts
	}
	busy := map[string]bool{}
	for _, g := range picked {
		busy[g.UUID] = true
	}
	for _, l := range d.leases {
		if l.NodeID == n.ID && d.leaseEnd(l).After(p.start) {
			for _, u := range l.GPUUUIDs {
				busy[u] = true
			}
		}
	}
	free := 0
	for _, g := range n.GPUs { // a GPU swapped out since is no longer the node's
		if !busy[g.UUID] && (rj == nil || refUsable(rj, g)) {
			free++
		}
	}
	if free < p.gpus {
		d.fail("%s on %s leaves %d usable GPUs at %s for %s's reservation of %d", j.ID, n.ID, free, p.start.Sub(now), owner, p.gpus)
	}
}

// checkPromise checks that a reservation starts no later than it first
// promised, and records the promise.
func (d *driver) checkPromise(j *idlegrid.Job, r *market.Reservation) {
	var nodes []string
	for _, n := range r.Nodes {
		nodes = append(nodes, n.NodeID)
	}
	key := fmt.Sprint(nodes)
	if p, ok := d.reserved[j.ID]; ok && p.nodes == key {
		if r.Start.After(p.start.Add(maxStep)) {
			d.fail("%s's reservation slipped from %s to %s", j.ID, p.start.Sub(now), r.Start.Sub(now))
		}
		return
	}
	d.forgetPromise(j.ID)
	d.reserved[j.ID] = promise{start: r.Start, nodes: key, gpus: r.Nodes[0].GPUs}
	for _, n := range nodes {
		d.resNode[n] = j.ID
	}
}

func (d *driver) forgetPromise(job string) {
	delete(d.reserved, job)
	for n, owner := range d.resNode {
		if owner == job {
			delete(d.resNode, n)
		}
	}
}

func (d *driver) giveNotice(id string, at, stop time.Time) {
	l := d.leases[id]
	l.NoticeAt, l.NoticeSeconds = &at, d.cfg.NoticeSeconds
	d.stopAt[id] = stop
	d.e.AddLease(l)
}

func (d *driver) endLease(id string) {
	delete(d.leases, id)
	delete(d.stopAt, id)
	d.e.RemoveLease(id)
}

// until is a node's window end now, by the domain's schedule.
func (d *driver) until(n *idlegrid.Node) time.Time {
	u, ok := d.untils[n.ID]
	if !ok {
		u = n.Schedule.AvailableUntil(d.now)
		d.untils[n.ID] = u
	}
	return u
}

func (d *driver) advance(by time.Duration) {
	d.now = d.now.Add(by)
	clear(d.untils)
	for _, n := range d.e.Advance(d.now) {
		l := d.leases[n.LeaseID]
		switch {
		case l == nil:
			d.fail("notice for unknown lease %s", n.LeaseID)
		case l.Tier != idlegrid.TierBronze:
			d.fail("notice for %s lease %s", l.Tier, l.ID)
		case l.NoticeAt != nil:
			d.fail("second notice for lease %s", l.ID)
		case n.StopAt.Sub(n.NoticeAt) < time.Duration(d.cfg.NoticeSeconds)*time.Second:
			d.fail("notice for %s of only %s", l.ID, n.StopAt.Sub(n.NoticeAt))
		}
		d.giveNotice(n.LeaseID, n.NoticeAt, n.StopAt)
		d.stats.windowNotices++
	}
	for _, id := range slices.Sorted(maps.Keys(d.leases)) {
		l := d.leases[id]
		if stop, ok := d.stopAt[id]; ok && !d.now.Before(stop) {
			if d.now.Sub(*l.NoticeAt) < time.Duration(d.cfg.NoticeSeconds)*time.Second {
				d.fail("stopping %s %s after its notice", id, d.now.Sub(*l.NoticeAt))
			}
			d.stats.stops++
			d.endLease(id)
		} else if !d.now.Before(l.StartedAt.Add(time.Duration(l.LimitSeconds) * time.Second)) {
			d.endLease(id) // finished at its time limit
		}
	}
}

// promisedEnd is the end a lease's placement promised: its creation plus
// its time limit. A bronze lease's window notice is judged by it, so that
// its start delay is not held against it.
func promisedEnd(l *idlegrid.Lease) time.Time {
	return l.CreatedAt.Add(time.Duration(l.LimitSeconds) * time.Second)
}

// check runs the invariants that hold between steps.
func (d *driver) check() error {
	if err := d.e.Verify(); err != nil {
		return err
	}
	seen := map[string]string{}
	for _, id := range slices.Sorted(maps.Keys(d.leases)) {
		l := d.leases[id]
		for _, u := range l.GPUUUIDs {
			if o, ok := seen[l.NodeID+"/"+u]; ok {
				return fmt.Errorf("GPU %s held by %s and %s", u, o, id)
			}
			seen[l.NodeID+"/"+u] = id
		}
		n := d.nodes[l.NodeID]
		if n == nil {
			continue
		}
		until := d.until(n)
		end := l.StartedAt.Add(time.Duration(l.LimitSeconds) * time.Second)
		switch {
		case l.Tier != idlegrid.TierBronze:
			if until.Before(end) && !until.IsZero() || until.IsZero() && end.After(d.now) {
				return fmt.Errorf("%s lease %s runs to %s, past its window's end %s", l.Tier, id, end.Sub(now), until.Sub(now))
			}
		case l.NoticeAt == nil && promisedEnd(l).After(until) && until.Sub(d.now) <= time.Duration(d.cfg.NoticeSeconds)*time.Second-maxStep:
			return fmt.Errorf("bronze lease %s outlives its window (ends %s, window %s) without notice", id, end.Sub(now), until.Sub(now))
		}
	}
	return nil
}
