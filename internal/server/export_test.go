package server

import (
	"context"
	"time"

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

// NextUptimeLook is when the uptime pass next looks at a node; ok is false
// when this coordinator does not watch it.
func (s *Server) NextUptimeLook(nodeID string) (at time.Time, ok bool) {
	s.trust.umu.Lock()
	defer s.trust.umu.Unlock()
	if tr := s.trust.uptime[nodeID]; tr != nil {
		return tr.due, true
	}
	return time.Time{}, false
}

// BuildEngine builds an engine from the store, as a resync does, and
// drops it.
func (s *Server) BuildEngine(ctx context.Context) error {
	_, err := s.buildEngine(ctx, false)
	return err
}

// JobsWatched is how many jobs watches wait on now.
func (s *Server) JobsWatched() int { return s.watches.len() }
