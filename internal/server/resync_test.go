package server_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// A periodic resync builds the new engine off the scheduler goroutine: a
// job submitted while the build waits is placed at once, and the new
// engine, built from reads made before that placement, still holds its
// lease when it takes over.
func TestServer_ResyncOffTheScheduler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &slowResync{}
		m := mustMoneyMarketOn(t, func(s idlegrid.Store) idlegrid.Store { slow.Store = s; return slow })
		m.advance(t, 30*time.Second) // the first build is done
		release := slow.arm()
		m.advance(t, 5*time.Minute+10*time.Second) // past the resync period: a resync reads, then waits
		if !slow.holding() {
			t.Fatal("no resync read the live leases in five minutes")
		}
		first := mustPlacedOn(t, m, m.nodeID) // the cheaper node
		release()
		synctest.Wait()
		second := mustPlacedOn(t, m, "")
		if second.NodeID == first.NodeID {
			t.Fatalf("the second job went to %s, whose GPUs the first holds", second.NodeID)
		}
		if n := slow.conflicts(); n != 0 {
			t.Fatalf("the store refused %d placements: the new engine did not hold the first lease", n)
		}
	})
}

// mustPlacedOn submits a two-GPU job and returns its lease, placed on
// node nodeID when that is set.
func mustPlacedOn(t *testing.T, m *testMarket, nodeID string) *idlegrid.Lease {
	t.Helper()
	j, err := m.srv.SubmitJob(m.renter, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	leases, err := m.store.ListLeases(context.Background(), idlegrid.LeaseFilter{JobID: j.ID})
	if err != nil || len(leases) != 1 {
		t.Fatalf("job %s has %d leases (%v), want 1: the scheduler did not place it", j.ID, len(leases), err)
	}
	if nodeID != "" && leases[0].NodeID != nodeID {
		t.Fatalf("job placed on %s, want %s", leases[0].NodeID, nodeID)
	}
	return leases[0]
}

// slowResync is a store whose next read of every live lease (an engine
// build's), once armed, waits after reading until released, and that
// counts the placements it refuses for a conflict.
type slowResync struct {
	idlegrid.Store
	mu      sync.Mutex
	gate    chan struct{} // armed: the next build's read waits on it
	held    bool          // a read waits
	refused int
}

func (s *slowResync) arm() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gate := make(chan struct{})
	s.gate = gate
	return sync.OnceFunc(func() { close(gate) })
}

func (s *slowResync) holding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *slowResync) conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func (s *slowResync) ListLeases(ctx context.Context, f idlegrid.LeaseFilter) ([]*idlegrid.Lease, error) {
	leases, err := s.Store.ListLeases(ctx, f)
	if f.JobID != "" || f.RenterID != "" || f.NodeID != "" || len(f.States) == 0 {
		return leases, err
	}
	s.mu.Lock()
	gate := s.gate
	s.gate, s.held = nil, gate != nil
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return leases, err
}

func (s *slowResync) PlaceJobs(ctx context.Context, ps []*idlegrid.Placement) []error {
	errs := s.Store.PlaceJobs(ctx, ps)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, err := range errs {
		if idlegrid.ErrorCode(err) == idlegrid.ECONFLICT {
			s.refused++
		}
	}
	return errs
}
