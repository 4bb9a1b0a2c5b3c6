package server

import (
	"context"
	"time"

	"github.com/idlegrid/idlegrid"
)

// readyTimeout bounds the database's answer to a readiness check.
const readyTimeout = 2 * time.Second

// Ready says whether the server can do its work: EUNAVAILABLE, saying
// why, until the scheduler has built its engine from the store (seconds,
// at 100,000 nodes) and while the database does not answer. A load
// balancer or an orchestrator sends traffic only to a ready server.
func (s *Server) Ready(ctx context.Context) error {
	if !s.built.Load() {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the market engine is not built from the database yet; try again shortly")
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return s.store.Ping(ctx)
}
