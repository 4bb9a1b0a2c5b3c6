package server

import (
	"context"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// readyTimeout bounds the database's answer to a readiness check.
const readyTimeout = 2 * time.Second

// schedulerWait bounds how long a readiness check waits for the scheduler
// to take a question. It takes them between passes and between two
// placements of a pass, so one that has taken none for this long is stuck.
const schedulerWait = 10 * time.Second

// Ready says whether the server can do its work: EUNAVAILABLE, saying
// why, until the scheduler has built its engine from the store (seconds,
// at 100,000 nodes), while the database does not answer, and while the
// scheduler is stuck. (A market lock in doubt holds placing up, not the
// API: the scheduler answers questions meanwhile, and the server stays
// ready; idlegrid_market_lock_in_doubt says so.) A load balancer or an orchestrator sends traffic only
// to a ready server.
func (s *Server) Ready(ctx context.Context) error {
	if !s.built.Load() {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the market engine is not built from the database yet; try again shortly")
	}
	// The database first: when it does not answer, that is why.
	pinged, cancel := context.WithTimeout(ctx, readyTimeout)
	err := s.store.Ping(pinged)
	cancel()
	if err != nil {
		return err
	}
	asked, cancel := context.WithTimeout(ctx, schedulerWait)
	err = s.ask(asked, func(*market.Engine) {})
	stuck := err != nil && asked.Err() != nil && ctx.Err() == nil
	cancel()
	if stuck {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the scheduler has taken no question for %s: a placement pass is stuck (see the logs and idlegrid_schedule_pass_seconds)", schedulerWait)
	}
	return err
}
