package server

import (
	"context"

	"github.com/idlegrid/idlegrid/internal/market"
)

// Ask is ask, for tests.
func (s *Server) Ask(ctx context.Context, f func(e *market.Engine)) error { return s.ask(ctx, f) }

// Resync makes the scheduler rebuild its engine from the store at its next
// pass, as it does every resyncEvery and after the store refuses a
// placement, and kicks it.
func (s *Server) Resync() {
	s.rebuild.Store(true)
	s.Kick()
}
