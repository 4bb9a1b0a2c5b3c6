package sqlstore

import (
	"context"
	"sync/atomic"

	"github.com/idlegrid/idlegrid"
)

// GuardedDB is the store as the market's engine places through it: a
// placement waits while the market lock is in doubt (MarketLock.Hold),
// so that two servers never place at once, and is refused as unavailable
// once the lock is lost. The first placement after the lock was taken
// again on a new session is refused as a conflict, which has the engine
// rebuild its view of the market from the store: another server may have
// held the lock, and placed, meanwhile. Everything else is the DB's.
type GuardedDB struct {
	*DB
	lock *MarketLock
	term atomic.Uint64 // the lock's term the engine last placed under
}

var _ idlegrid.Store = (*GuardedDB)(nil)

// Guard returns db guarded by l, for the coordinator's engine.
func (l *MarketLock) Guard(db *DB) *GuardedDB {
	g := &GuardedDB{DB: db, lock: l}
	l.mu.Lock()
	g.term.Store(l.term)
	l.mu.Unlock()
	return g
}

// PlaceJob stores a placement once the market lock is sure.
func (g *GuardedDB) PlaceJob(ctx context.Context, p *idlegrid.Placement) error {
	if err := g.hold(ctx); err != nil {
		return err
	}
	return g.DB.PlaceJob(ctx, p)
}

// PlaceJobs stores placements once the market lock is sure; when it is
// not, each of them gets the same error.
func (g *GuardedDB) PlaceJobs(ctx context.Context, ps []*idlegrid.Placement) []error {
	if err := g.hold(ctx); err != nil {
		errs := make([]error, len(ps))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return g.DB.PlaceJobs(ctx, ps)
}

// MarketDoubt is why the engine may not place now: the market lock in
// doubt or lost (MarketLock.Doubt); nil while it is sure. The reaper asks
// it before each pass.
func (g *GuardedDB) MarketDoubt() error { return g.lock.Doubt() }

// hold waits until the market lock is sure, and says whether the engine
// may place.
func (g *GuardedDB) hold(ctx context.Context) error {
	term, err := g.lock.Hold(ctx)
	if err != nil {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "not placing: %v", err)
	}
	if g.term.Swap(term) != term {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "the market lock was taken again on a new database session: the market may have changed meanwhile")
	}
	return nil
}
