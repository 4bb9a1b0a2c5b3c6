package server_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// mustGang submits a job on both of the market's nodes and has them start
// it; it returns the job and its two started leases, the first on m.node.
func mustGang(t *testing.T, m *testMarket) (*idlegrid.Job, []answered) {
	t.Helper()
	spec := testSpec()
	spec.Nodes = 2
	j, err := m.srv.SubmitJob(m.renter, spec)
	if err != nil {
		t.Fatal(err)
	}
	started := reportOn(t, m, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}, func(c idlegrid.Command) bool {
		return c.Kind == idlegrid.CommandStart && c.Lease.JobID == j.ID
	})
	if len(started) != 2 || started[0].node != m.node {
		t.Fatalf("started %d leases of the gang, want one on each node", len(started))
	}
	return j, started
}

// mustFindJob reads a job as its renter sees it.
func mustFindJob(t *testing.T, m *testMarket, id string) *idlegrid.Job {
	t.Helper()
	j, err := m.srv.FindJob(m.renter, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// confirmStops reports, as the agents would, every stop the nodes were
// asked for the job's leases; it returns how many there were.
func confirmStops(t *testing.T, m *testMarket, jobID string) int {
	t.Helper()
	return len(reportOn(t, m, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "stopped as asked"},
		func(c idlegrid.Command) bool { return c.Kind == idlegrid.CommandStop && c.Lease.JobID == jobID }))
}

// TestServer_GangRequeue: a gang runs whole or not at all. When one of its
// nodes fails, the others are stopped, paid for what they ran, and the
// job goes back to the queue as a one-node job would; a renter's cancel
// still cancels it.
func TestServer_GangRequeue(t *testing.T) {
	t.Run("a node fails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMoneyMarket(t)
			j, gang := mustGang(t, m)
			m.advance(t, 10*time.Minute)
			failed, other := gang[0].lease, gang[1].lease
			rivalID := idlegrid.CallerFromContext(m.rival).NodeID
			l := mustFindLease(t, m, other.ID)
			if err := m.srv.ReceiveReceipts(m.rival, l.ID, chain(l, nodeKey(t, rivalID), nil, 300, 300)); err != nil {
				t.Fatal(err)
			}
			if err := m.srv.ReportLease(m.node, failed.ID, idlegrid.LeaseReport{State: idlegrid.LeaseFailed,
				Fault: idlegrid.FaultProvider, Message: "GPU fell off the bus"}); err != nil {
				t.Fatal(err)
			}
			if n := confirmStops(t, m, j.ID); n != 1 {
				t.Fatalf("%d stops confirmed, want the other node's", n)
			}
			if got := mustFindLease(t, m, failed.ID); got.State != idlegrid.LeaseFailed || got.ChargedMicros != 0 {
				t.Errorf("the failed lease is %s charged %s, want failed charged nothing", got.State, got.ChargedMicros)
			}
			// The other node did nothing wrong: the server stopped it, and
			// the renter pays for what it ran (600 s of its receipts).
			got := mustFindLease(t, m, other.ID)
			if want := idlegrid.CostOf(got.PriceMicrosPerGPUHour, 2*600); got.State != idlegrid.LeasePreempted || got.ChargedMicros != want {
				t.Errorf("the other lease is %s (%q) charged %s, want preempted charged %s", got.State, got.Reason, got.ChargedMicros, want)
			}
			synctest.Wait() // the scheduler places the job again
			if job := mustFindJob(t, m, j.ID); job.State.Terminal() || job.Attempts != 2 {
				t.Fatalf("job is %s after %d attempts (%q), want placed again", job.State, job.Attempts, job.Reason)
			}
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("a node is lost", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMoneyMarket(t)
			j, gang := mustGang(t, m)
			for range 12 { // a minute in which only the rival heartbeats
				if _, err := m.srv.Heartbeat(m.rival, idlegrid.HeartbeatRequest{}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Second)
			}
			synctest.Wait()
			if got := mustFindLease(t, m, gang[0].lease.ID); got.State != idlegrid.LeaseLost {
				t.Fatalf("the silent node's lease is %s, want lost", got.State)
			}
			if n := confirmStops(t, m, j.ID); n != 1 {
				t.Fatalf("%d stops confirmed, want the rival's", n)
			}
			if job := mustFindJob(t, m, j.ID); job.State != idlegrid.JobQueued || job.Attempts != 1 {
				t.Fatalf("job is %s after %d attempts (%q), want queued again (no second node)", job.State, job.Attempts, job.Reason)
			}
		})
	})
	t.Run("the other lease had not started", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMoneyMarket(t)
			spec := testSpec()
			spec.Nodes = 2
			j, err := m.srv.SubmitJob(m.renter, spec)
			if err != nil {
				t.Fatal(err)
			}
			one := reportOn(t, m, idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider, Message: "image pull failed"},
				func(c idlegrid.Command) bool { return c.Kind == idlegrid.CommandStart && c.Lease.NodeID == m.nodeID })
			if len(one) != 1 {
				t.Fatal("the first node was not told to start the gang")
			}
			synctest.Wait()
			if job := mustFindJob(t, m, j.ID); job.State.Terminal() || job.Attempts != 2 {
				t.Fatalf("job is %s after %d attempts (%q), want placed again", job.State, job.Attempts, job.Reason)
			}
		})
	})
	t.Run("the renter cancels", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMoneyMarket(t)
			j, gang := mustGang(t, m)
			m.advance(t, time.Minute)
			if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
				t.Fatal(err)
			}
			// One node fails before it confirms the stop: the cancel stands.
			if err := m.srv.ReportLease(m.node, gang[0].lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseFailed,
				Fault: idlegrid.FaultProvider, Message: "GPU fell off the bus"}); err != nil {
				t.Fatal(err)
			}
			if n := confirmStops(t, m, j.ID); n != 1 {
				t.Fatalf("%d stops confirmed, want the rival's", n)
			}
			if job := mustFindJob(t, m, j.ID); job.State != idlegrid.JobCancelled {
				t.Fatalf("job is %s (%q), want cancelled", job.State, job.Reason)
			}
		})
	})
}

// hangUp is a store that cancels the request that ends a lease or
// resolves a hardware challenge as soon as that is committed: a client
// that hangs up at that moment.
type hangUp struct {
	idlegrid.Store
	mu     sync.Mutex
	cancel context.CancelFunc
}

// request returns a request made from ctx that the next commit cancels.
func (s *hangUp) request(ctx context.Context) (context.Context, context.CancelFunc) {
	req, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	return req, cancel
}

func (s *hangUp) committed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.cancel != nil {
		s.cancel()
	}
}

func (s *hangUp) TransitionLease(ctx context.Context, t *idlegrid.LeaseTransition, transfers []*idlegrid.Transfer) error {
	err := s.Store.TransitionLease(ctx, t, transfers)
	if t.To.Terminal() {
		s.committed(err)
	}
	return err
}

func (s *hangUp) ResolveChallenge(ctx context.Context, c *idlegrid.Challenge, q *idlegrid.Quarantine, f *idlegrid.FollowUp) (bool, error) {
	quarantined, err := s.Store.ResolveChallenge(ctx, c, q, f)
	s.committed(err)
	return quarantined, err
}

// mustHangUpMarket is mustMarketOn the hangUp store it returns.
func mustHangUpMarket(t *testing.T, policy *trustpolicy.Policy) (*testMarket, *hangUp) {
	t.Helper()
	h := &hangUp{}
	m := mustMarketOn(t, policy, func(s idlegrid.Store) idlegrid.Store { h.Store = s; return h })
	return m, h
}

// TestServer_FollowUpOutlivesTheRequest: what follows a commit, here
// convicting a node that broke a bronze lease's notice or failed a hardware
// challenge, is done even if the node's request is cancelled right after
// the commit.
func TestServer_FollowUpOutlivesTheRequest(t *testing.T) {
	t.Run("a broken notice", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, h := mustHangUpMarket(t, trustpolicy.Default())
			mustBond(t, m, 100)
			spec := testSpec()
			spec.Tier = idlegrid.TierBronze
			l, node := mustRunningFor(t, m, spec, 30*time.Minute)

			req, cancel := h.request(node)
			defer cancel()
			if err := m.srv.ReportLease(req, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "owner wanted the GPU"}); err != nil {
				t.Fatal(err)
			}
			if req.Err() == nil {
				t.Fatal("the request was not cancelled after the lease ended")
			}
			wantConviction(t, m, "broken_notice", l.NodeID)
		})
	})
	t.Run("a failed challenge", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, h := mustHangUpMarket(t, goldForAll)
			resp := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1")))
			liar := resp.Challenges[1]
			req, cancel := h.request(m.node)
			defer cancel()
			if got := mustAnswer(t, m, req, liar, answer(t, liar, "T4", 14899)); got.State != idlegrid.ChallengeFailed {
				t.Fatalf("lying answer: %s, want failed", got.State)
			}
			if req.Err() == nil {
				t.Fatal("the request was not cancelled after the challenge was resolved")
			}
			wantConviction(t, m, "fake_hardware", m.nodeID)
			if _, failed := challengeFacts(t, m, m.nodeID); failed != 1 {
				t.Errorf("%d failed challenges in the node's reputation, want 1", failed)
			}
		})
	})
}

// wantConviction checks that the market upheld one dispute, for offence
// by node.
func wantConviction(t *testing.T, m *testMarket, offence, nodeID string) {
	t.Helper()
	ds, err := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{})
	if err != nil {
		t.Fatal(err)
	} else if len(ds) != 1 || ds[0].Offence != offence || ds[0].State != idlegrid.DisputeUpheld || ds[0].NodeID != nodeID {
		t.Fatalf("disputes = %+v, want one upheld %s against %s", ds, offence, nodeID)
	}
}

// TestServer_PreemptsBronzeGangWhole: a gold job that preempts one lease
// of a bronze gang gives every lease of the gang its notice at once, as
// stopping one stops them all; so does a server whose market was rebuilt
// from the store after the gang was placed.
func TestServer_PreemptsBronzeGangWhole(t *testing.T) {
	for _, rebuilt := range []bool{false, true} {
		t.Run(map[bool]string{false: "placed", true: "rebuilt"}[rebuilt], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMarket(t)
				spec := testSpec()
				spec.Tier, spec.MaxPriceMicrosPerGPUHour, spec.Nodes = idlegrid.TierBronze, 600_000, 2
				j, err := m.srv.SubmitJob(m.renter, spec)
				if err != nil {
					t.Fatal(err)
				}
				m.advance(t, 5*time.Second)
				gang := reportOn(t, m, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}, func(c idlegrid.Command) bool {
					return c.Kind == idlegrid.CommandStart && c.Lease.JobID == j.ID
				})
				if len(gang) != 2 {
					t.Fatalf("started %d leases of the gang, want 2", len(gang))
				}
				m.advance(t, 10*time.Minute) // past the minimum runtime
				if rebuilt {
					m.srv.Resync()
					synctest.Wait()
				}
				mustSubmitGold(t, m)
				for _, g := range gang {
					l := mustFindLease(t, m, g.lease.ID)
					if l.NoticeAt == nil || !l.NoticeAt.Equal(m.srv.Now()) || l.NoticeSeconds != 120 {
						t.Fatalf("lease %s of the gang: notice at %v for %d s, want 120 s from now", l.ID, l.NoticeAt, l.NoticeSeconds)
					}
				}
				// Both workloads stop within their notice: each lease ends
				// preempted, paid for what it ran, and the job is queued
				// again once, as a gang.
				m.advance(t, 30*time.Second)
				if n := len(reportOn(t, m, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "stopped as asked"},
					func(c idlegrid.Command) bool { return c.Kind == idlegrid.CommandStop && c.Lease.JobID == j.ID })); n != 2 {
					t.Fatalf("%d stops confirmed, want both leases'", n)
				}
				synctest.Wait()
				for _, g := range gang {
					if l := mustFindLease(t, m, g.lease.ID); l.State != idlegrid.LeasePreempted || l.ChargedMicros == 0 {
						t.Errorf("lease %s of the gang is %s charged %s, want preempted and paid for what it ran", l.ID, l.State, l.ChargedMicros)
					}
				}
				if job := mustFindJob(t, m, j.ID); job.State.Terminal() || job.Attempts != 1 {
					t.Errorf("the gang's job is %s after %d attempts (%q), want queued again after its one", job.State, job.Attempts, job.Reason)
				}
				mustLedgerBalanced(t, m.store)
			})
		})
	}
}
