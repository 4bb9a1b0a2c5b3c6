package trustsim

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/reputation"
)

// Clock is a virtual clock that only its owner moves. It is safe for
// concurrent use: the coordinator's goroutines read it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

var _ idlegrid.Clock = (*Clock)(nil)

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t.UTC().Truncate(time.Microsecond)} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock d forward.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// AdvanceTo moves the clock to t, if t is later.
func (c *Clock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

// gatedStore is the real store with a gate before the scheduler's pass:
// the coordinator's scheduler starts each pass by reading the queue
// (ListJobs of queued jobs, oldest first), and that read waits until the
// simulation opens the gate at the end of a step. Placements then depend
// only on the state at the end of each step, never on when the wall
// clock let the scheduler's goroutine run.
type gatedStore struct {
	idlegrid.Store
	mu     sync.Mutex
	isOpen bool
	opened chan struct{} // closed while the gate is open
	passes atomic.Int64  // queue reads let through
}

func newGatedStore(s idlegrid.Store) *gatedStore {
	return &gatedStore{Store: s, opened: make(chan struct{})}
}

func (g *gatedStore) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.isOpen {
		g.isOpen = true
		close(g.opened)
	}
}

func (g *gatedStore) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isOpen {
		g.isOpen = false
		g.opened = make(chan struct{})
	}
}

func (g *gatedStore) gate() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opened
}

// ListJobs waits at the gate when it is the scheduler's queue read.
func (g *gatedStore) ListJobs(ctx context.Context, f idlegrid.JobFilter) ([]*idlegrid.Job, error) {
	if f.OldestFirst && slices.Equal(f.States, []idlegrid.JobState{idlegrid.JobQueued}) {
		select {
		case <-g.gate():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		g.passes.Add(1)
	}
	return g.Store.ListJobs(ctx, f)
}

// readFlags reads, once a step, which providers the market has flagged:
// an upheld dispute, a quarantined node, or the reputation flag
// (reputation.Params.Flag: a score below the flag line with at least two
// incidents behind it).
// The first signal, and the leases seen by then, are kept.
func (w *world) readFlags() error {
	signal := map[string]string{}
	disputes, err := w.store.ListDisputes(w.ctx, idlegrid.DisputeFilter{States: []idlegrid.DisputeState{idlegrid.DisputeUpheld}, Limit: 1 << 30})
	if err != nil {
		return err
	}
	for _, d := range disputes {
		if signal[d.ProviderID] == "" {
			signal[d.ProviderID] = "dispute:" + d.Offence
		}
	}
	qs, err := w.store.ListQuarantines(w.ctx, idlegrid.QuarantineFilter{})
	if err != nil {
		return err
	}
	for _, q := range qs {
		if signal[q.ProviderID] == "" {
			signal[q.ProviderID] = "quarantine"
		}
	}
	reps, err := w.store.ListReputations(w.ctx, idlegrid.ReputationFilter{Subject: idlegrid.SubjectProvider})
	if err != nil {
		return err
	}
	params := w.cfg.Policy.Reputation
	params.FlagBelow = w.cfg.FlagScore
	now := w.clock.Now()
	for _, r := range reps {
		if signal[r.SubjectID] == "" && params.Flag(reputation.EvidenceOf(r), now).Flagged {
			signal[r.SubjectID] = "score"
		}
	}
	for _, p := range w.provs {
		if s := signal[p.id]; s != "" && p.flaggedAt < 0 {
			p.flaggedAt, p.flaggedBy, p.flaggedHrs = p.seen, s, w.hours()
		}
	}
	return nil
}
