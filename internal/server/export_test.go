package server

import (
	"context"

	"github.com/idlegrid/idlegrid/internal/market"
)

// Ask is ask, for tests.
func (s *Server) Ask(ctx context.Context, f func(e *market.Engine)) error { return s.ask(ctx, f) }
