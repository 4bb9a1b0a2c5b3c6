package server_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
)

// failLostOnce is a store that fails the first lease end to lost it is
// asked for, as a database that is briefly unavailable would.
type failLostOnce struct {
	idlegrid.Store
	mu     sync.Mutex
	failed string // the lease whose end failed
}

func (s *failLostOnce) TransitionLease(ctx context.Context, t *idlegrid.LeaseTransition, transfers []*idlegrid.Transfer) error {
	s.mu.Lock()
	fail := s.failed == "" && t.To == idlegrid.LeaseLost
	if fail {
		s.failed = t.LeaseID
	}
	s.mu.Unlock()
	if fail {
		return errors.New("database is locked")
	}
	return s.Store.TransitionLease(ctx, t, transfers)
}

func (s *failLostOnce) failedLease() string { s.mu.Lock(); defer s.mu.Unlock(); return s.failed }

// beatAfterRead is a store in which, once armed, the node heartbeats just
// after the next read of it: while the reaper decides it is lost.
type beatAfterRead struct {
	idlegrid.Store
	nodeID string
	armed  atomic.Bool
}

func (s *beatAfterRead) FindNode(ctx context.Context, id string) (*idlegrid.Node, error) {
	n, err := s.Store.FindNode(ctx, id)
	if err == nil && id == s.nodeID && s.armed.CompareAndSwap(true, false) {
		_, err = s.Store.Heartbeat(ctx, id, time.Now())
	}
	return n, err
}

// mustLostMarket is a market on wrap's store in which a node is lost after
// a minute without heartbeats, and the reaper's own passes come a minute
// apart, so that a test runs passes of its own between them. Two one-GPU
// jobs run on m.node (mustTwoLeasesOn), silent since; it returns their
// leases once the node is past the minute allowed.
func mustLostMarket(t *testing.T, wrap func(idlegrid.Store) idlegrid.Store) (*testMarket, []*idlegrid.Lease) {
	t.Helper()
	m, leases := mustTwoLeasesOn(t, wrap)
	// The reaper's pass at a minute finds the nodes silent for exactly
	// the minute allowed; at a minute and a second they are lost.
	time.Sleep(time.Minute + time.Second)
	synctest.Wait()
	return m, leases
}

// mustTwoLeasesOn is a market on wrap's store in which a node is lost
// after a minute without heartbeats, with two one-GPU leases running on
// m.node; it returns the leases.
func mustTwoLeasesOn(t *testing.T, wrap func(idlegrid.Store) idlegrid.Store) (*testMarket, []*idlegrid.Lease) {
	t.Helper()
	m := mustMarketOn(t, goldForAll, wrap, func(c *server.Config) {
		c.HeartbeatInterval, c.MissedHeartbeats = time.Minute, 1
	})
	spec := testSpec()
	spec.GPUs = 1
	for range 2 {
		if _, err := m.srv.SubmitJob(m.renter, spec); err != nil {
			t.Fatal(err)
		}
	}
	var leases []*idlegrid.Lease
	for _, a := range reportOn(t, m, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}, func(c idlegrid.Command) bool {
		return c.Kind == idlegrid.CommandStart
	}) {
		if a.lease.NodeID != m.nodeID {
			t.Fatalf("lease %s went to %s, want %s", a.lease.ID, a.lease.NodeID, m.nodeID)
		}
		leases = append(leases, a.lease)
	}
	if len(leases) != 2 {
		t.Fatalf("%d leases started, want 2", len(leases))
	}
	return m, leases
}

// wantLostAndRequeued checks that lease l ended lost through its node's
// fault, and its job waits in the queue again.
func wantLostAndRequeued(t *testing.T, m *testMarket, l *idlegrid.Lease) {
	t.Helper()
	got := mustFindLease(t, m, l.ID)
	if got.State != idlegrid.LeaseLost || got.Fault != idlegrid.FaultProvider || got.ChargedMicros != 0 {
		t.Fatalf("lease %s is %s (fault %q, %q) charged %s, want lost by the provider's fault, charged nothing",
			l.ID, got.State, got.Fault, got.Reason, got.ChargedMicros)
	}
	if j := mustFindJob(t, m, l.JobID); j.State != idlegrid.JobQueued || j.Attempts != 1 {
		t.Fatalf("job %s is %s after %d attempts (%q), want queued again", j.ID, j.State, j.Attempts, j.Reason)
	}
}

// TestServer_Reap_lostNodesLeases: the leases of a lost node all end, even
// when one fails to end as the node is declared lost, or the coordinator
// stopped before ending them.
func TestServer_Reap_lostNodesLeases(t *testing.T) {
	t.Run("one fails to end", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fail := &failLostOnce{}
			m, leases := mustLostMarket(t, func(s idlegrid.Store) idlegrid.Store { fail.Store = s; return fail })
			ctx := context.Background()
			if err := m.srv.Reap(ctx); err == nil {
				t.Fatal("Reap = nil, want the failed end's error")
			}
			if n := mustNodeState(t, m, m.nodeID); n != idlegrid.NodeLost {
				t.Fatalf("node is %s, want lost", n)
			}
			failed := fail.failedLease()
			for _, l := range leases {
				if l.ID != failed {
					wantLostAndRequeued(t, m, l) // the failure stopped no other lease's end
				} else if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseRunning {
					t.Fatalf("the lease whose end failed is %s, want still running", got.State)
				}
			}
			if err := m.srv.Reap(ctx); err != nil {
				t.Fatalf("the next pass: %v", err)
			}
			for _, l := range leases {
				wantLostAndRequeued(t, m, l)
			}
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("the coordinator stopped before ending them", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, leases := mustLostMarket(t, func(s idlegrid.Store) idlegrid.Store { return s })
			ctx := context.Background()
			// What a pass committed before the coordinator stopped.
			if err := m.store.SetNodeState(ctx, m.nodeID, idlegrid.NodeLost, m.srv.Now()); err != nil {
				t.Fatal(err)
			}
			if err := m.srv.Reap(ctx); err != nil {
				t.Fatal(err)
			}
			for _, l := range leases {
				wantLostAndRequeued(t, m, l)
			}
		})
	})
}

// TestServer_Reap_heartbeatWhileDeclaringLost: a node that heartbeats
// after the reaper read it as silent, and before it is declared lost, is
// not lost, and its leases run on.
func TestServer_Reap_heartbeatWhileDeclaringLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		beat := &beatAfterRead{}
		m, leases := mustLostMarket(t, func(s idlegrid.Store) idlegrid.Store { beat.Store = s; return beat })
		beat.nodeID = m.nodeID
		beat.armed.Store(true)
		if err := m.srv.Reap(context.Background()); err != nil {
			t.Fatal(err)
		}
		if beat.armed.Load() {
			t.Fatal("the reaper did not read the silent node")
		}
		if n := mustNodeState(t, m, m.nodeID); n != idlegrid.NodeOnline {
			t.Fatalf("node is %s, want online: it beat before it was declared lost", n)
		}
		for _, l := range leases {
			if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseRunning {
				t.Errorf("lease %s is %s (%q), want running", l.ID, got.State, got.Reason)
			}
		}
	})
}

func mustNodeState(t *testing.T, m *testMarket, id string) idlegrid.NodeState {
	t.Helper()
	n, err := m.store.FindNode(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return n.State
}

// doubting is a store whose market lock may be in doubt
// (sqlstore.GuardedDB's MarketDoubt).
type doubting struct {
	idlegrid.Store
	doubt atomic.Pointer[error]
}

func (d *doubting) MarketDoubt() error {
	if err := d.doubt.Load(); err != nil {
		return *err
	}
	return nil
}

// TestServer_Reap_marketLockInDoubt: while the market lock is in doubt,
// another server may be running the market, and the reaper declares no
// node lost and ends no lease; once the lock is sure again, it does.
func TestServer_Reap_marketLockInDoubt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &doubting{}
		m, leases := mustLostMarket(t, func(s idlegrid.Store) idlegrid.Store { d.Store = s; return d })
		ctx := context.Background()
		inDoubt := errors.New("the market lock is in doubt")
		d.doubt.Store(&inDoubt)
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if n := mustNodeState(t, m, m.nodeID); n != idlegrid.NodeOnline {
			t.Fatalf("node is %s while the lock is in doubt, want still online", n)
		}
		d.doubt.Store(nil)
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		for _, l := range leases {
			wantLostAndRequeued(t, m, l)
		}
	})
}

// failNodeReads is a store whose reads of a node fail once armed, and
// which counts the reaper's reads of what is maturing and of renters'
// stakes.
type failNodeReads struct {
	idlegrid.Store
	armed            atomic.Bool
	maturing, stakes atomic.Int64
}

func (s *failNodeReads) FindNode(ctx context.Context, id string) (*idlegrid.Node, error) {
	if s.armed.Load() {
		return nil, errors.New("database is locked")
	}
	return s.Store.FindNode(ctx, id)
}

func (s *failNodeReads) ListMaturing(ctx context.Context, before time.Time, limit int) ([]*idlegrid.Transfer, error) {
	s.maturing.Add(1)
	return s.Store.ListMaturing(ctx, before, limit)
}

func (s *failNodeReads) RenterStakes(ctx context.Context) ([]*idlegrid.RenterStake, error) {
	s.stakes.Add(1)
	return s.Store.RenterStakes(ctx)
}

// TestServer_Reap_restAfterNodesFail: a pass that cannot judge its silent
// nodes still matures earnings and checks renters' money, rather than
// leave them for a pass that may fail the same way.
func TestServer_Reap_restAfterNodesFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := &failNodeReads{}
		m, _ := mustLostMarket(t, func(s idlegrid.Store) idlegrid.Store { fail.Store = s; return fail })
		fail.armed.Store(true)
		maturing, stakes := fail.maturing.Load(), fail.stakes.Load()
		if err := m.srv.Reap(context.Background()); err == nil {
			t.Fatal("Reap = nil, want the failed node read's error")
		}
		if fail.maturing.Load() == maturing || fail.stakes.Load() == stakes {
			t.Errorf("the pass read maturing earnings %d and stakes %d times, want each at least once",
				fail.maturing.Load()-maturing, fail.stakes.Load()-stakes)
		}
	})
}
