package server

import (
	"context"

	"github.com/idlegrid/idlegrid/internal/market"
)

// Resync: every resyncEvery the scheduler rebuilds its engine from the
// store, a safety net under the marks. A build reads every online node and
// live lease (0.3 s at 10,000 nodes and 5,000 leases, BenchmarkBuildEngine),
// so the periodic one runs off the scheduler goroutine while the scheduler
// goes on placing with the engine it has, noting what it changes in it
// meanwhile: the nodes, leases and jobs of the marks it applies, the
// leases it places or gives notice to, the jobs it forgets. When the build
// is done, those are read again into the new engine, which then takes over
// with the old one's clearing prices. A rebuild asked for because the engine disagrees with the store
// (a refused placement), the first build, and the NaiveMatcher's stay on
// the scheduler goroutine, and drop a resync in flight.

// resync is a build in flight, and what the scheduler changed in its
// engine since the build began.
type resync struct {
	done                chan builtEngine
	nodes, leases, jobs map[string]bool
	dropped             bool // a later build replaced it: its engine is not taken
}

type builtEngine struct {
	e   *market.Engine
	err error
}

// startResync builds a new engine on a goroutine of its own, which ends
// with ctx (waitResync waits for it).
func (s *Server) startResync(ctx context.Context) {
	r := &resync{done: make(chan builtEngine, 1), nodes: map[string]bool{}, leases: map[string]bool{}, jobs: map[string]bool{}}
	s.resyncing = r
	go func() {
		e, err := s.buildEngine(ctx, false)
		r.done <- builtEngine{e: e, err: err}
	}()
}

// resyncDone is the channel the build in flight reports on, or nil.
func (s *Server) resyncDone() <-chan builtEngine {
	if s.resyncing == nil {
		return nil
	}
	return s.resyncing.done
}

// takeResync returns the engine the resync built, brought up to date with
// what the scheduler changed in old since the build began, or old when the
// build failed or was dropped.
func (s *Server) takeResync(ctx context.Context, old *market.Engine, b builtEngine) *market.Engine {
	r := s.resyncing
	s.resyncing = nil
	switch {
	case r.dropped:
		return old
	case b.err != nil:
		if ctx.Err() == nil {
			s.log.Error("resync engine", "err", b.err)
		}
		return old
	}
	if err := s.applyChanges(ctx, b.e, r.nodes, r.leases, r.jobs); err != nil {
		if ctx.Err() == nil {
			s.log.Error("resync engine", "err", err)
		}
		return old
	}
	b.e.TakeMarket(old)
	return b.e
}

// dropResync marks the resync in flight, if any, as replaced by a build
// on the scheduler goroutine; its engine is dropped when it is done.
func (s *Server) dropResync() {
	if s.resyncing != nil {
		s.resyncing.dropped = true
	}
}

// waitResync waits for the resync in flight, if any, to end.
func (s *Server) waitResync() {
	if r := s.resyncing; r != nil {
		<-r.done
		s.resyncing = nil
	}
}

// note records marks applied to the engine in use during a resync; a nil
// resync (none in flight) records nothing.
func (r *resync) note(nodes, leases, jobs map[string]bool) {
	if r == nil {
		return
	}
	for id := range nodes {
		r.nodes[id] = true
	}
	for id := range leases {
		r.leases[id] = true
	}
	for id := range jobs {
		r.jobs[id] = true
	}
}

func (r *resync) noteLease(id string) {
	if r != nil {
		r.leases[id] = true
	}
}

func (r *resync) noteJob(id string) {
	if r != nil {
		r.jobs[id] = true
	}
}
