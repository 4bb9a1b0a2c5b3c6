package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/market"
)

// The scheduler goroutine owns the market engine. Everything else talks to
// it through marks (what changed in the store: a node, a lease, a job),
// Kick (something worth a pass now), and ask (run a function against the
// engine on the scheduler goroutine, e.g. to explain a job).

// resyncEvery is how often the scheduler rebuilds the engine from the store,
// as a safety net under the marks.
const resyncEvery = 5 * time.Minute

// marks collects what changed since the last pass.
type marks struct {
	mu     sync.Mutex
	nodes  map[string]bool
	leases map[string]bool
	jobs   map[string]bool
	known  map[string]bool // nodes the engine holds as online
}

func (m *marks) mark(set *map[string]bool, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if *set == nil {
		*set = map[string]bool{}
	}
	(*set)[id] = true
}

// take returns and clears the marks.
func (m *marks) take() (nodes, leases, jobs map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	nodes, leases, jobs = m.nodes, m.leases, m.jobs
	m.nodes, m.leases, m.jobs = nil, nil, nil
	return nodes, leases, jobs
}

func (m *marks) setKnown(id string, online bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known == nil {
		m.known = map[string]bool{}
	}
	if online {
		m.known[id] = true
	} else {
		delete(m.known, id)
	}
}

func (m *marks) isKnown(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.known[id]
}

func (s *Server) markNode(id string)  { s.marks.mark(&s.marks.nodes, id); s.Kick() }
func (s *Server) markLease(id string) { s.marks.mark(&s.marks.leases, id); s.Kick() }
func (s *Server) markJob(id string)   { s.marks.mark(&s.marks.jobs, id); s.Kick() }

// ask runs f against the engine on the scheduler goroutine and waits. ctx
// bounds only the wait for the scheduler to take f: between passes,
// between two placements of a pass (answerAsks), or while a batch is
// stored (answeringWhile). Once taken, f runs at once and ask waits for it
// to return, so that the caller never reads what f writes while it runs.
func (s *Server) ask(ctx context.Context, f func(e *market.Engine)) error {
	asked := time.Now()
	return s.runOn(ctx, s.asks, func(e *market.Engine) { s.metrics.askWait.Observe(time.Since(asked).Seconds()); f(e) })
}

// BetweenPasses returns once the scheduler is between placement passes: a
// pass that had begun has ended. A simulation driving the coordinator step
// by step waits on it. (Questions to the engine, ask, are also answered
// between the placements of a pass.)
func (s *Server) BetweenPasses(ctx context.Context) error {
	return s.runOn(ctx, s.passGap, func(*market.Engine) {})
}

// runOn hands f to the scheduler's goroutine on ch, which it reads at the
// moments ch's owner documents, and waits until f has run.
func (s *Server) runOn(ctx context.Context, ch chan func(*market.Engine), f func(*market.Engine)) error {
	done := make(chan struct{})
	select {
	case ch <- func(e *market.Engine) { f(e); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stopped:
		return errShuttingDown()
	}
	<-done
	return nil
}

// errShuttingDown is why a wait on the scheduler ended: it has stopped.
func errShuttingDown() error {
	return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the server is shutting down")
}

// runScheduler runs a placement pass whenever something may have changed
// (a job arrived, capacity freed, money came in), when the engine's next
// event is due (a window opens or closes, a notice runs out), and at least
// every SchedulePeriod.
func (s *Server) runScheduler(ctx context.Context) {
	defer close(s.stopped)
	defer s.waitResync()
	var engine, prev *market.Engine // prev: the engine a failed rebuild dropped
	var built time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-s.asks:
			if engine == nil {
				f(market.NewEngine(s.cfg.Market)) // not built yet: answer from an empty market
			} else {
				f(engine)
			}
			continue
		case f := <-s.passGap:
			f(engine)
			continue
		case <-s.kick:
		case <-timer.C:
		case b := <-s.resyncDone():
			engine = s.takeResync(ctx, engine, b)
		}
		resync := s.Now().Sub(built) > resyncEvery
		refused := engine != nil && s.rebuild.Swap(false)
		if engine == nil || refused || (resync && s.cfg.NaiveMatcher) {
			if refused {
				s.metrics.rebuilds.Inc()
			}
			s.dropResync() // this build reads the store later
			if engine != nil {
				prev = engine // its clearing prices outlive it (TakeMarket)
			}
			var err error
			engine, err = s.buildEngine(ctx, true)
			s.built.Store(err == nil)
			if err != nil {
				if ctx.Err() == nil { // not the server closing
					s.log.Error("build engine", "err", err)
				}
				engine = nil
				timer.Reset(s.cfg.SchedulePeriod)
				continue
			}
			if prev == nil { // the first build: the history is in the store only
				s.seedMarket(ctx, engine)
			}
			engine.TakeMarket(prev)
			prev = nil
			built = s.Now()
		} else if resync && s.resyncing == nil {
			s.startResync(ctx)
			built = s.Now()
		}
		start := time.Now()
		if err := s.schedulePass(ctx, engine); err != nil && ctx.Err() == nil {
			s.log.Error("schedule pass", "err", err)
		}
		s.metrics.timePass(start)
		timer.Reset(s.untilNext(engine))
	}
}

// untilNext is how long the scheduler may sleep when nothing happens.
func (s *Server) untilNext(e *market.Engine) time.Duration {
	wait := s.cfg.SchedulePeriod
	if next := e.NextEvent(); !next.IsZero() {
		wait = min(wait, max(next.Sub(s.Now()), 10*time.Millisecond))
	}
	return wait
}

// buildEngine loads the market from the store into a new engine. On the
// scheduler goroutine (onScheduler) the marks are dropped, as the store is
// read whole, and the NaiveMatcher's snapshot is rebuilt; off it (a resync)
// the marks are left to the engine in use.
func (s *Server) buildEngine(ctx context.Context, onScheduler bool) (*market.Engine, error) {
	if onScheduler {
		s.marks.take() // the store is read whole below
	}
	e := market.NewEngine(s.cfg.Market)
	e.Advance(s.Now())
	nodes, err := s.store.ListNodes(ctx, idlegrid.NodeFilter{States: []idlegrid.NodeState{idlegrid.NodeOnline}})
	if err != nil {
		return nil, err
	}
	nodes = slices.DeleteFunc(nodes, func(n *idlegrid.Node) bool { return !s.takesNewLeases(n) })
	for _, n := range nodes {
		e.UpsertNode(marketNode(n))
		s.marks.setKnown(n.ID, true)
	}
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{States: liveLeaseStates, Limit: everyRow})
	if err != nil {
		return nil, err
	}
	e.AddLeases(leases) // a gang's leases are linked again, as when placed
	if s.cfg.NaiveMatcher && onScheduler {
		s.naive = naiveSnapshot(nodes, leases, s.Now())
	}
	return e, nil
}

// seededLeases is how many of the newest stored leases a new server's
// market history starts from: enough to fill the history of a few dozen
// GPU models and regions.
const seededLeases = 4096

// seedMarket enters the clearing prices of the newest stored leases in the
// market history of the server's first engine, oldest first, so that the
// market view's prices over time and its suggested asks survive a restart.
// A lease counts for its first GPU's model and its node's region, as the
// engine counts its own. The history is a view: a store that cannot be
// read leaves it empty, and is logged.
func (s *Server) seedMarket(ctx context.Context, e *market.Engine) {
	failed := func(err error, attrs ...any) {
		if ctx.Err() == nil { // not a server closing as it starts
			s.log.Error("market history from the store", append(attrs, "err", err)...)
		}
	}
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{Limit: seededLeases})
	if err != nil {
		failed(err)
		return
	}
	nodes := map[string]*idlegrid.Node{}
	for _, l := range slices.Backward(leases) {
		n, seen := nodes[l.NodeID]
		if !seen {
			if n, err = s.store.FindNode(ctx, l.NodeID); err != nil && idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
				failed(err, "node", l.NodeID)
				return
			}
			nodes[l.NodeID] = n
		}
		if model := leaseModel(n, l); model != "" {
			e.RecordPrice(model, n.Region, market.PricePoint{At: l.CreatedAt, Tier: l.Tier,
				PriceMicrosPerGPUHour: l.PriceMicrosPerGPUHour, GPUs: len(l.GPUUUIDs), JobID: l.JobID})
		}
	}
}

// leaseModel is the model of the lease's first GPU on node n, or "" when
// the node or the GPU is gone.
func leaseModel(n *idlegrid.Node, l *idlegrid.Lease) string {
	if n == nil || len(l.GPUUUIDs) == 0 {
		return ""
	}
	for _, g := range n.GPUs {
		if g.UUID == l.GPUUUIDs[0] {
			return g.Model
		}
	}
	return ""
}

// takesNewLeases reports whether online node n is in the market: not
// while it is quarantined, nor while it waits for a hardware challenge it
// has owed too long (attest.go).
func (s *Server) takesNewLeases(n *idlegrid.Node) bool {
	if n.Quarantined {
		return false
	}
	c, _ := s.attest.owed.of(n.ID)
	return !c.closed
}

// applyMarks brings the engine up to date with what changed in the store.
func (s *Server) applyMarks(ctx context.Context, e *market.Engine) error {
	nodes, leases, jobs := s.marks.take()
	s.resyncing.note(nodes, leases, jobs)
	return s.applyChanges(ctx, e, nodes, leases, jobs)
}

// applyChanges reads the nodes, leases and jobs named into the engine as
// the store has them now.
func (s *Server) applyChanges(ctx context.Context, e *market.Engine, nodes, leases, jobs map[string]bool) error {
	for id := range nodes {
		n, err := s.store.FindNode(ctx, id)
		if err != nil && idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return err
		}
		if n != nil && n.State == idlegrid.NodeOnline && s.takesNewLeases(n) {
			e.UpsertNode(marketNode(n))
			if err := s.drainNotices(ctx, e, n); err != nil { // the engine's Advance gives any left, in a window's words
				s.log.Error("drain notices", "node", n.ID, "err", err)
			}
		} else {
			e.RemoveNode(id)
		}
		s.marks.setKnown(id, n != nil && n.State == idlegrid.NodeOnline)
	}
	for id := range leases {
		l, err := s.store.FindLease(ctx, id)
		if err != nil && idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return err
		}
		if l != nil && !l.State.Terminal() {
			e.AddLease(l)
		} else {
			e.RemoveLease(id)
		}
	}
	for id := range jobs {
		e.ForgetJob(id)
	}
	return nil
}

// readQueue reads up to Config.QueuedPerPass queued jobs, highest tier
// first and oldest first within a tier. It reads the oldest queued jobs
// and, when they fill a page, the younger jobs of the tiers above the
// page's lowest too, which outrank its jobs of that tier: a gold job is
// read at once however many older jobs of lower tiers wait.
func (s *Server) readQueue(ctx context.Context) ([]*idlegrid.Job, error) {
	queued, limit := []idlegrid.JobState{idlegrid.JobQueued}, s.cfg.QueuedPerPass
	jobs, err := s.store.ListJobs(ctx, idlegrid.JobFilter{States: queued, Limit: limit, OldestFirst: true})
	if err != nil {
		return nil, err
	}
	if above := tiersAbove(jobs); len(jobs) == limit && len(above) > 0 {
		more, err := s.store.ListJobs(ctx, idlegrid.JobFilter{States: queued, Tiers: above,
			After: jobs[len(jobs)-1].ID, Limit: limit, OldestFirst: true})
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, more...)
	}
	// Within a tier the jobs after the page are younger than its own.
	slices.SortStableFunc(jobs, func(a, b *idlegrid.Job) int { return cmp.Compare(a.Tier.Rank(), b.Tier.Rank()) })
	return jobs[:min(len(jobs), limit)], nil
}

// tiersAbove returns the tiers above the lowest of jobs'.
func tiersAbove(jobs []*idlegrid.Job) []idlegrid.Tier {
	lowest := 0
	for _, j := range jobs {
		lowest = max(lowest, j.Tier.Rank())
	}
	var above []idlegrid.Tier
	for _, t := range idlegrid.Tiers {
		if t.Rank() < lowest {
			above = append(above, t)
		}
	}
	return above
}

// schedulePass gives the notices that are due, then tries to place every
// queued job, highest tier first and oldest first within a tier. A job that
// cannot be placed stays queued with the engine's reason.
func (s *Server) schedulePass(ctx context.Context, e *market.Engine) error {
	// Read the queue before the marks: every change that happened before a
	// job was submitted is then in the engine when the job is placed.
	jobs, err := s.readQueue(ctx)
	if err != nil {
		return err
	}
	if err := s.applyMarks(ctx, e); err != nil {
		return err
	}
	now := s.Now()
	for _, n := range e.Advance(now) {
		if err := s.giveNotice(ctx, e, n.LeaseID, n.Reason); err != nil && ctx.Err() == nil { // not the server closing
			s.log.Error("give notice", "lease", n.LeaseID, "err", err)
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	b := s.newBatch(e, now)
	for _, j := range jobs {
		if ctx.Err() != nil {
			return nil
		}
		e.NoteQueued(j)
		if err := s.placeJob(ctx, e, j, now, b); err != nil && ctx.Err() == nil { // the server closing leaves it queued
			s.log.Error("place job", "job", j.ID, "err", err)
		}
		s.answerAsks(e)
	}
	err = b.flush(ctx)
	if len(jobs) == s.cfg.QueuedPerPass && b.stored > 0 {
		s.Kick() // more may wait unread: the next pass takes them at once
	}
	return err
}

// everyRow is the Limit of the server's own reads that must see every row:
// without one the store returns its default page.
const everyRow = 1 << 30

// answerAsks runs the asks waiting for the engine (ask), between two
// placements of a pass: a pass of thousands of jobs takes seconds, and a
// node list or an explanation must not wait that long.
func (s *Server) answerAsks(e *market.Engine) {
	for {
		select {
		case f := <-s.asks:
			f(e)
		default:
			return
		}
	}
}

// answeringWhile runs write, a store write that does not read the engine,
// on a goroutine of its own, and answers the asks for e until it returns:
// a full batch takes a fifth of a second to store.
func (s *Server) answeringWhile(e *market.Engine, write func() []error) []error {
	done := make(chan []error, 1)
	go func() { done <- write() }() // ends with write; answeringWhile waits for it
	for {
		select {
		case errs := <-done:
			return errs
		case f := <-s.asks:
			f(e)
		}
	}
}

// defaultQueuedPerPass is how many queued jobs one pass reads unless
// Config.QueuedPerPass says.
const defaultQueuedPerPass = 10000

// pastLatestStart says why a queued job can no longer finish by its
// deadline, or "" while it still can. The run it names is the one the job
// has left (Job.LatestStart): its duration less what its checkpoint holds.
func pastLatestStart(j *idlegrid.Job, now time.Time) string {
	latest, ok := j.LatestStart()
	if !ok || !now.After(latest) {
		return ""
	}
	seconds := func(n int64) time.Duration { return time.Duration(n) * time.Second }
	run := seconds(max(j.DurationSeconds-j.ResumeSeconds, 1)).String() + " run"
	if j.ResumeSeconds > 0 {
		run += fmt.Sprintf(" left (its checkpoint holds %s of its %s)", seconds(j.ResumeSeconds), seconds(j.DurationSeconds))
	}
	return fmt.Sprintf("it had not started by %s, the last start that could finish its %s by its deadline, %s",
		latest.UTC().Format(time.RFC3339), run, j.Deadline.UTC().Format(time.RFC3339))
}

// unplaceable says why a queued job must be cancelled rather than placed,
// or "": its renter cancelled it (a coordinator of an older version may
// have requeued it since), or it can no longer finish by its deadline.
func unplaceable(j *idlegrid.Job, now time.Time) string {
	if j.CancelRequested() {
		return idlegrid.RenterCancelReason
	}
	return pastLatestStart(j, now)
}

// placeJob asks the engine about one job and carries out its decision.
func (s *Server) placeJob(ctx context.Context, e *market.Engine, j *idlegrid.Job, now time.Time, b *placementBatch) error {
	if reason := unplaceable(j, now); reason != "" {
		e.ForgetJob(j.ID)
		s.resyncing.noteJob(j.ID)
		err := s.store.CancelQueuedJob(ctx, j.ID, reason, now)
		if err == nil {
			s.jobChanged(j.ID)
		}
		return err
	}
	d := s.decide(e, j, now)
	if d.Placed() {
		return s.storePlacement(ctx, e, j, d, now, b)
	}
	for _, p := range d.Preemptions {
		reason := fmt.Sprintf("preempted for %s job %s", j.Tier, j.ID)
		if err := s.giveNotice(ctx, e, p.LeaseID, reason); err != nil {
			return err
		}
	}
	// Every decision is committed: a waiting one ends a reservation that
	// no longer fits, which would keep other jobs off its GPUs.
	e.Commit(j, d, now)
	return s.setReason(ctx, j, d.Reason)
}

// storePlacement checks that the renter can pay the placement's holds and
// adds it to the pass's batch, which stores it, then tells the engine and
// the agents.
func (s *Server) storePlacement(ctx context.Context, e *market.Engine, j *idlegrid.Job, d market.Decision, now time.Time, b *placementBatch) error {
	p := s.placement(e, j, d.Picks, now)
	hold := holdOf(p)
	avail, err := s.available(ctx, j.RenterID, b.funds)
	if err != nil {
		return err
	}
	if hold > avail {
		// The job waits unplaced: it must not keep a reservation that holds
		// GPUs other renters could use. It stays in the market's demand.
		e.ForgetJob(j.ID)
		e.NoteQueued(j)
		return s.setReason(ctx, j, fmt.Sprintf("waiting for funds: the escrow hold is %s and the renter has %s available; top up the account", hold, avail))
	}
	return b.add(ctx, j, d, p, hold)
}

// placement turns the engine's picks into leases and their escrow holds.
func (s *Server) placement(e *market.Engine, j *idlegrid.Job, picks []market.Pick, now time.Time) *idlegrid.Placement {
	p := &idlegrid.Placement{JobID: j.ID, Attempt: j.Attempts, At: now}
	for _, pick := range picks {
		l := &idlegrid.Lease{
			ID: idlegrid.NewID("lease"), JobID: j.ID, RenterID: j.RenterID,
			NodeID: pick.Node.ID, ProviderID: pick.Node.ProviderID, Attempt: j.Attempts + 1,
			Tier: j.Tier, PriceMicrosPerGPUHour: pick.PriceMicrosPerGPUHour, PriceNote: pick.PriceNote(),
			LimitSeconds: j.DurationSeconds, State: idlegrid.LeaseAssigned,
			Reason: "placed on " + pick.Node.Name, CreatedAt: now, CheckpointRef: j.CheckpointRef,
		}
		if j.Tier == idlegrid.TierBronze {
			l.NoticeSeconds = e.Config().NoticeSeconds
		}
		l.StartBy = s.startBy(j, pick.StartBy, now)
		for _, g := range pick.GPUs {
			l.GPUUUIDs = append(l.GPUUUIDs, g.UUID)
		}
		l.HoldMicros = ledger.HoldFor(l.PriceMicrosPerGPUHour, len(l.GPUUUIDs), l.LimitSeconds)
		p.Leases = append(p.Leases, l)
		if t := ledger.Hold(l, now); t != nil {
			t.ID = idlegrid.NewID("tx")
			p.Transfers = append(p.Transfers, t)
		}
	}
	return p
}

// giveNotice asks a bronze lease's agent to stop it: the workload gets
// SIGTERM now and the lease's notice period to checkpoint and exit.
func (s *Server) giveNotice(ctx context.Context, e *market.Engine, leaseID, reason string) error {
	l, err := s.store.FindLease(ctx, leaseID)
	if err != nil {
		return err
	} else if l.State.Terminal() || l.StopRequested != "" {
		return nil
	}
	if err := s.stopLease(ctx, l, noticePrefix+reason); err != nil {
		return err
	}
	if l, err = s.store.FindLease(ctx, leaseID); err == nil && !l.State.Terminal() {
		e.AddLease(l) // the engine sees the notice
		s.resyncing.noteLease(leaseID)
	}
	return nil
}

// noticePrefix marks a stop that is a bronze notice: the lease ends as
// preempted and its job is requeued from its checkpoint.
const noticePrefix = idlegrid.NoticeStopPrefix

func (s *Server) available(ctx context.Context, renterID string, funds map[string]idlegrid.Micros) (idlegrid.Micros, error) {
	if v, ok := funds[renterID]; ok {
		return v, nil
	}
	b, err := s.store.Balance(ctx, renterID)
	if err != nil {
		return 0, err
	}
	funds[renterID] = b.Available
	return b.Available, nil
}

// setReason records why a job waits, writing only when the reason changed.
func (s *Server) setReason(ctx context.Context, j *idlegrid.Job, reason string) error {
	if reason == j.Reason || reason == "" {
		return nil
	}
	err := s.store.SetJobReason(ctx, j.ID, reason, s.Now())
	if err == nil {
		s.jobChanged(j.ID)
	}
	return err
}

// Market returns supply, demand, clearing prices, fill rate and a
// suggested ask for each GPU model and region. Any account may look; the
// view is at most marketViewTTL old.
func (s *Server) Market(ctx context.Context) ([]market.MarketStat, error) {
	if _, err := account(ctx); err != nil {
		return nil, err
	}
	return s.marketView.get(ctx, "", s.Now(), func(ctx context.Context) ([]market.MarketStat, error) {
		var stats []market.MarketStat
		err := s.askScan(ctx, "market views", func(e *market.Engine) { stats = e.MarketView(s.Now()) })
		return stats, err
	})
}
