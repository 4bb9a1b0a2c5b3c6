package server

import (
	"context"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// defaultPlacementBatch is how many placements a pass stores in one
// transaction unless Config.PlacementBatch says. A durable commit costs
// far more than the rows it writes, and a batch's placements share the
// index pages it changes (those keyed by node, say), so a pass that places
// many jobs commits them together (Store.PlaceJobs). Only a backlog fills
// a batch, which is stored in a fifth of a second or so; a job that
// arrives while the scheduler is idle is placed at once, in a batch of
// one.
const defaultPlacementBatch = 1024

// placementBatch is what one pass has decided to place and not stored yet.
// The engine already holds the picked GPUs for each job (Commit leaves a
// claim), so the next decision in the pass cannot pick them again; flush
// stores the batch and then tells the engine and the agents what stuck.
type placementBatch struct {
	s     *Server
	e     *market.Engine
	now   time.Time
	funds map[string]idlegrid.Micros // renters' available balance, drawn down as we place
	jobs  []*idlegrid.Job
	ds    []market.Decision
	ps    []*idlegrid.Placement
	holds []idlegrid.Micros

	stored int // placements stored so far in this pass
}

func (s *Server) newBatch(e *market.Engine, now time.Time) *placementBatch {
	return &placementBatch{s: s, e: e, now: now, funds: map[string]idlegrid.Micros{}}
}

// add takes the placement's GPUs and hold now and stores it with the rest
// of the batch, at once when the batch is full.
func (b *placementBatch) add(ctx context.Context, j *idlegrid.Job, d market.Decision, p *idlegrid.Placement, hold idlegrid.Micros) error {
	if b.s.naive != nil {
		for _, pick := range d.Picks {
			b.s.naive.Claim(pick)
		}
	} else {
		b.e.Commit(j, d, b.now)
	}
	b.funds[j.RenterID] -= hold
	b.s.placing[j.ID] = true
	b.jobs, b.ds, b.ps, b.holds = append(b.jobs, j), append(b.ds, d), append(b.ps, p), append(b.holds, hold)
	if len(b.ps) >= b.s.cfg.PlacementBatch {
		return b.flush(ctx)
	}
	return nil
}

// flush stores the batch in one transaction and carries out each
// placement's outcome.
func (b *placementBatch) flush(ctx context.Context) error {
	if len(b.ps) == 0 {
		return nil
	}
	errs := b.s.answeringWhile(b.e, func() []error { return b.s.store.PlaceJobs(ctx, b.ps) })
	var first error
	for i, err := range errs {
		if err := b.settle(ctx, i, err); err != nil && first == nil {
			first = err
		}
	}
	clear(b.s.placing)
	close(b.s.stored) // the explanations waiting for these jobs go on
	b.s.stored = make(chan struct{})
	clear(b.jobs)
	clear(b.ps)
	b.jobs, b.ds, b.ps, b.holds = b.jobs[:0], b.ds[:0], b.ps[:0], b.holds[:0]
	return first
}

// settle tells the engine and the agents about placement i once the store
// said err about it.
func (b *placementBatch) settle(ctx context.Context, i int, err error) error {
	j, d, p := b.jobs[i], b.ds[i], b.ps[i]
	if err == nil {
		b.stored++
		b.s.metrics.placements.Inc()
		b.s.jobChanged(j.ID)
		for k, l := range p.Leases {
			b.e.AddLease(l)
			b.s.resyncing.noteLease(l.ID)
			b.s.waiters.notify(l.NodeID)
			b.s.log.Info("job placed", "job", j.ID, "lease", l.ID, "node", l.NodeID,
				"price_per_gpu_hour", l.PriceMicrosPerGPUHour.String(), "note", d.Picks[k].PriceNote())
		}
		return nil
	}
	// Not stored: give back the GPUs, the money and the job's place in the queue.
	if b.s.naive != nil {
		b.s.rebuild.Store(true) // the snapshot holds GPUs the store did not give
	}
	b.e.ForgetJob(j.ID)
	b.s.resyncing.noteJob(j.ID)
	b.e.NoteQueued(j)
	b.funds[j.RenterID] += b.holds[i]
	switch idlegrid.ErrorCode(err) {
	case idlegrid.ECONFLICT:
		// A job that moved on (cancelled while it was placed, say) is
		// forgotten above, and nothing else the engine holds is wrong; a GPU
		// or a node that moved on under the engine is: rebuild it from the
		// store, which at 100,000 nodes takes the scheduler seconds.
		if !idlegrid.JobMovedOn(err) {
			b.s.rebuild.Store(true)
		}
		b.s.Kick()
		return nil
	case idlegrid.EPAYMENT:
		delete(b.funds, j.RenterID) // read the balance again
		return b.s.setReason(ctx, j, waitingForMoney(err))
	}
	b.s.rebuild.Store(true) // the engine holds what the store refused
	return err
}

// The naive matcher (Config.NaiveMatcher) is the baseline that
// BenchmarkServerPlace measures the engine against, in the same passes and
// the same batched commits: market.FirstMatcher, which scans every node for
// every job, over a market.Snapshot of the online nodes' free GPUs. The
// snapshot is built with the engine (at start, after a conflict, every
// resyncEvery) and takes each placement's GPUs as it is decided; it does not
// follow leases that end or nodes that change in between. It places jobs
// pay-as-bid and never preempts or reserves. It is not for serving a market.

// decide is the matcher's decision for j: the engine's, or the naive
// baseline's.
func (s *Server) decide(e *market.Engine, j *idlegrid.Job, now time.Time) market.Decision {
	if s.naive == nil {
		return e.Place(j, now)
	}
	s.naive.Now = now
	return market.NewFirstMatcher().Place(j, s.naive)
}

// naiveSnapshot is the baseline's view of the market: each node that
// takes new leases (the engine's) with the GPUs no live lease holds, and
// its window as of now.
func naiveSnapshot(nodes []*idlegrid.Node, leases []*idlegrid.Lease, now time.Time) *market.Snapshot {
	type gpuKey struct{ node, uuid string }
	held := map[gpuKey]bool{}
	for _, l := range leases {
		for _, u := range l.GPUUUIDs {
			held[gpuKey{l.NodeID, u}] = true
		}
	}
	snap := &market.Snapshot{Now: now}
	for _, n := range nodes {
		n = marketNode(n)
		v := &market.NodeView{Node: n, AvailableUntil: n.Schedule.AvailableUntil(now)}
		for _, g := range n.GPUs {
			if !held[gpuKey{n.ID, g.UUID}] {
				v.FreeGPUs = append(v.FreeGPUs, g)
			}
		}
		snap.Nodes = append(snap.Nodes, v)
	}
	return snap
}
