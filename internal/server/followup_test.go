package server_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/metricstest"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// flaky is a store whose calls named in fail fail that many times, as a
// database that went away, or a coordinator that stopped, between a
// lease's end and what follows it would leave them undone.
type flaky struct {
	idlegrid.Store
	mu   sync.Mutex
	fail map[string]int
}

func (f *flaky) failing(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[call] == 0 {
		return nil
	}
	f.fail[call]--
	return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "%s: the database went away", call)
}

// arm has the next n calls named call fail.
func (f *flaky) arm(call string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		f.fail = map[string]int{}
	}
	f.fail[call] = n
}

// ListLeases fails only a gang's read (afterLeaseEnded).
func (f *flaky) ListLeases(ctx context.Context, lf idlegrid.LeaseFilter) ([]*idlegrid.Lease, error) {
	if lf.JobID == "" {
		return f.Store.ListLeases(ctx, lf)
	}
	if err := f.failing("ListLeases"); err != nil {
		return nil, err
	}
	return f.Store.ListLeases(ctx, lf)
}

func (f *flaky) OpenDispute(ctx context.Context, d *idlegrid.Dispute, penalty *idlegrid.Transfer, held *idlegrid.FollowUp) error {
	if err := f.failing("OpenDispute"); err != nil {
		return err
	}
	return f.Store.OpenDispute(ctx, d, penalty, held)
}

func (f *flaky) FindVerificationByJob(ctx context.Context, jobID string) (*idlegrid.Verification, error) {
	if err := f.failing("FindVerificationByJob"); err != nil {
		return nil, err
	}
	return f.Store.FindVerificationByJob(ctx, jobID)
}

func (f *flaky) ListNodes(ctx context.Context, nf idlegrid.NodeFilter) ([]*idlegrid.Node, error) {
	if err := f.failing("ListNodes"); err != nil {
		return nil, err
	}
	return f.Store.ListNodes(ctx, nf)
}

func (f *flaky) DoneFollowUp(ctx context.Context, id string) error {
	if err := f.failing("DoneFollowUp"); err != nil {
		return err
	}
	return f.Store.DoneFollowUp(ctx, id)
}

// mustFlakyMarket is a market on a flaky store whose leases wait long to
// be started, so that a job queued while the reaper's turn comes waits.
func mustFlakyMarket(t *testing.T, policy *trustpolicy.Policy, tune ...func(*server.Config)) (*testMarket, *flaky) {
	t.Helper()
	f := &flaky{}
	m := mustMarketOn(t, policy, func(s idlegrid.Store) idlegrid.Store { f.Store = s; return f },
		append([]func(*server.Config){func(c *server.Config) { c.StartTimeout = time.Hour }}, tune...)...)
	return m, f
}

// wantNoFollowUps fails t unless no follow-up is pending.
func wantNoFollowUps(t *testing.T, m *testMarket) {
	t.Helper()
	fs, err := m.store.DueFollowUps(context.Background(), time.Now().Add(24*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	} else if len(fs) != 0 {
		t.Errorf("pending follow-ups %+v, want none", fs)
	}
}

// reapLater lets the reaper's turn for follow-ups come, the live path's
// time being up, while nodes, and the market's, keep heartbeating.
func reapLater(t *testing.T, m *testMarket, nodes ...context.Context) {
	t.Helper()
	for range 3 * 60 / 5 {
		for _, n := range append([]context.Context{m.node, m.rival}, nodes...) {
			if _, err := m.srv.Heartbeat(n, idlegrid.HeartbeatRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Second)
	}
	synctest.Wait()
	if err := m.srv.Reap(context.Background()); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
}

// mustPending is the one follow-up pending, after tries failed tries of
// the reaper.
func mustPending(t *testing.T, m *testMarket, tries int) *idlegrid.FollowUp {
	t.Helper()
	fs, err := m.store.DueFollowUps(context.Background(), time.Now().Add(24*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Tries != tries {
		t.Fatalf("pending follow-ups %+v, want one after %d failed tries", fs, tries)
	}
	return fs[0]
}

// TestServer_FollowUps: what follows a lease's end is done once, even
// when it fails after the end was committed: the reaper does it again.
func TestServer_FollowUps(t *testing.T) {
	t.Run("a gang's other lease is stopped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, f := mustFlakyMarket(t, goldForAll)
			j, gang := mustGang(t, m)
			f.arm("ListLeases", 1)
			if err := m.srv.ReportLease(m.node, gang[0].lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseFailed,
				Fault: idlegrid.FaultProvider, Message: "GPU fell off the bus"}); err != nil {
				t.Fatal(err)
			}
			if n := confirmStops(t, m, j.ID); n != 0 {
				t.Fatalf("%d stops confirmed before the reaper's turn, want none: the gang's read failed", n)
			}
			reapLater(t, m)
			// The reaper stopped it with the gang (and, since no agent
			// confirmed the stop, ended it).
			want := "notice: another lease of the job ended: failed"
			if got := mustFindLease(t, m, gang[1].lease.ID); got.StopRequested != want {
				t.Errorf("the other lease is %s, asked to stop for %q; want asked to stop for %q", got.State, got.StopRequested, want)
			}
			wantNoFollowUps(t, m)
		})
	})
	t.Run("a follow-up that fails again waits longer each time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, f := mustFlakyMarket(t, goldForAll)
			j, gang := mustGang(t, m)
			f.arm("ListLeases", 3) // the live path's read of the gang, and the reaper's first two
			if err := m.srv.ReportLease(m.node, gang[0].lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseFailed,
				Fault: idlegrid.FaultProvider, Message: "GPU fell off the bus"}); err != nil {
				t.Fatal(err)
			}
			due := mustPending(t, m, 0).DueAt // the live path's chance over
			// The reaper tries at its first pass past each due time: the
			// wait from one due time to the next is the wait after a
			// failed try, and a pass's period more at most.
			for tries, wait := range []time.Duration{2 * time.Minute, 4 * time.Minute} {
				reapLater(t, m)
				next := mustPending(t, m, tries+1).DueAt
				if gap := next.Sub(due); gap < wait || gap > wait+time.Minute {
					t.Fatalf("after %d failed tries the follow-up is due %s after it was, want %s (and a pass's period)", tries+1, gap, wait)
				}
				due = next
			}
			if n := confirmStops(t, m, j.ID); n != 0 {
				t.Fatalf("%d stops confirmed before the follow-up succeeded, want none", n)
			}
			reapLater(t, m)
			wantNoFollowUps(t, m)
			if got := mustFindLease(t, m, gang[1].lease.ID); got.StopRequested == "" {
				t.Errorf("the other lease is %s, not asked to stop once the follow-up succeeded", got.State)
			}
		})
	})
	t.Run("a broken notice is convicted once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, f := mustFlakyMarket(t, trustpolicy.Default())
			mustBond(t, m, 100)
			spec := testSpec()
			spec.Tier = idlegrid.TierBronze
			l, node := mustRunningFor(t, m, spec, 30*time.Minute)
			f.arm("OpenDispute", 1)
			if err := m.srv.ReportLease(node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "owner wanted the GPU"}); err != nil {
				t.Fatal(err)
			}
			if ds, _ := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{}); len(ds) != 0 {
				t.Fatalf("disputes %+v before the reaper's turn, want none: the conviction failed", ds)
			}
			reapLater(t, m)
			wantConviction(t, m, "broken_notice", l.NodeID)
			wantNoFollowUps(t, m)
			reapLater(t, m)
			wantConviction(t, m, "broken_notice", l.NodeID)
			ts, err := m.store.ListTransfers(context.Background(), idlegrid.TransferFilter{
				AccountID: m.renterID, Kinds: []idlegrid.TransferKind{idlegrid.TransferPenalty}})
			if err != nil || len(ts) != 1 {
				t.Errorf("penalty transfers %+v (%v), want one", ts, err)
			}
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("a re-run's end advances its verification once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, f := mustFlakyMarket(t, verifyAll)
			mustBond(t, m, 100)
			_, second := mustProviderNode(t, m, "second")
			_, third := mustProviderNode(t, m, "third")
			nodes := []context.Context{m.node, m.rival, second, third}
			spec := testSpec()
			spec.Verifiable = true
			j, err := m.srv.SubmitJob(m.renter, spec)
			if err != nil {
				t.Fatal(err)
			}
			mustRunDigest(t, m, nodes, j.ID, "sha256:right")
			v := mustVerification(t, m)
			// The re-run's end is noted once, by the reaper.
			f.arm("FindVerificationByJob", 1)
			mustRunDigest(t, m, nodes, v.Rerun.JobID, "sha256:wrong")
			if v = mustVerification(t, m); v.State != idlegrid.VerificationRerunning {
				t.Fatalf("verification %s before the reaper's turn, want still re-running: its read failed", v.State)
			}
			reapLater(t, m, second, third)
			if v = mustVerification(t, m); v.State != idlegrid.VerificationTiebreaking || v.Tiebreak == nil {
				t.Fatalf("verification %+v, want a tie-break", v)
			}
			wantNoFollowUps(t, m)
			// Now the tie-break's end is noted, but its follow-up is not
			// removed: the reaper notes it again, which changes nothing.
			f.arm("DoneFollowUp", 1)
			mustRunDigest(t, m, nodes, v.Tiebreak.JobID, "sha256:right")
			reapLater(t, m, second, third)
			if v = mustVerification(t, m); v.State != idlegrid.VerificationConvicted || v.DisputeID == "" {
				t.Fatalf("verification %+v, want the re-run's provider convicted", v)
			}
			wantNoFollowUps(t, m)
			ds, err := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{})
			if err != nil || len(ds) != 1 || ds[0].ID != v.DisputeID {
				t.Errorf("disputes %+v (%v), want the one conviction %s", ds, err, v.DisputeID)
			}
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("a re-run's end noted twice starts one tie-break", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, f := mustFlakyMarket(t, verifyAll)
			mustBond(t, m, 100)
			_, second := mustProviderNode(t, m, "second")
			_, third := mustProviderNode(t, m, "third")
			nodes := []context.Context{m.node, m.rival, second, third}
			spec := testSpec()
			spec.Verifiable = true
			j, err := m.srv.SubmitJob(m.renter, spec)
			if err != nil {
				t.Fatal(err)
			}
			mustRunDigest(t, m, nodes, j.ID, "sha256:right")
			v := mustVerification(t, m)
			f.arm("DoneFollowUp", 1)
			mustRunDigest(t, m, nodes, v.Rerun.JobID, "sha256:wrong")
			v = mustVerification(t, m)
			if v.State != idlegrid.VerificationTiebreaking || v.Tiebreak == nil {
				t.Fatalf("verification %+v, want a tie-break", v)
			}
			reapLater(t, m, second, third)
			got := mustVerification(t, m)
			if got.State != idlegrid.VerificationTiebreaking || got.Tiebreak == nil || got.Tiebreak.JobID != v.Tiebreak.JobID {
				t.Errorf("verification %+v after the re-run's end was noted again, want still breaking the tie with %s", got, v.Tiebreak.JobID)
			}
			if ds, _ := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{}); len(ds) != 0 {
				t.Errorf("disputes %+v, want none before the tie-break runs", ds)
			}
			wantNoFollowUps(t, m)
		})
	})
}

// TestServer_FollowUps_offenceHold: an upheld dispute whose restand of
// its provider's nodes fails after the upholding was committed is
// restood by the reaper, from the follow-up stored with the dispute, as
// its metric counts. (This node, online, would be held at the reaper's
// next look anyway; TestServer_OffenceHold_followUp holds a lost one.)
func TestServer_FollowUps_offenceHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, f := mustFlakyMarket(t, levelsHeld, func(c *server.Config) { c.Metrics = reg })
		makeTrusted(t, m)
		d, err := m.srv.OpenDispute(m.admin, idlegrid.Dispute{Offence: "mismatched_result", ProviderID: callerID(m.provider),
			NodeID: m.nodeID, Evidence: "the renter's re-run differs"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		f.arm("ListNodes", 1)
		if _, err := m.srv.ResolveDispute(m.admin, d.ID, idlegrid.DisputeUpheld, "two re-runs agree with each other"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := mustNode(t, m); n.Level != 2 {
			t.Fatalf("barn-1 is level %d after the restand failed, want 2 until the reaper's turn", n.Level)
		}
		reapLater(t, m)
		if n := mustNode(t, m); n.Level != 0 {
			t.Fatalf("barn-1 is level %d after the reaper's turn, want 0: held by %s", n.Level, d.ID)
		}
		wantNoFollowUps(t, m)
		if n := metricstest.Value(t, reg, "idlegrid_follow_ups_redone_total", map[string]string{"kind": "provider_held", "outcome": "done"}); n != 1 {
			t.Errorf("provider_held follow-ups redone = %v, want 1", n)
		}
	})
}

// TestServer_FollowUps_challenge: a failed hardware challenge's conviction
// that fails after the quarantine was committed is done by the reaper,
// once.
func TestServer_FollowUps_challenge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := mustFlakyMarket(t, trustpolicy.Default())
		mustBond(t, m, 1000)
		resp := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1")))
		liar := resp.Challenges[0]
		f.arm("OpenDispute", 1)
		if got := mustAnswer(t, m, m.node, liar, answer(t, liar, "T4", 14899)); got.State != idlegrid.ChallengeFailed {
			t.Fatalf("lying answer: %s, want failed", got.State)
		}
		synctest.Wait()
		if ds, _ := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{}); len(ds) != 0 {
			t.Fatalf("disputes %+v before the reaper's turn, want none: the conviction failed", ds)
		}
		reapLater(t, m)
		wantConviction(t, m, "fake_hardware", m.nodeID)
		wantNoFollowUps(t, m)
		reapLater(t, m)
		if ds, err := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{}); err != nil || len(ds) != 1 {
			t.Errorf("disputes %+v (%v) after another reaper's turn, want the one", ds, err)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// TestServer_FollowUps_servedOnce: a cancelled lease's GPU-seconds served
// count in its node's standing once, even when the coordinator stops just after
// saving them: the save removes the lease's follow-up in its own
// transaction, so the reaper has nothing to do again.
func TestServer_FollowUps_servedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := mustFlakyMarket(t, trustpolicy.Default())
		l, node := mustRunningFor(t, m, testSpec(), 10*time.Minute)
		// The renter cancels it: an end that is no fact about the node, so
		// that no fact's key guards the GPU-seconds served.
		if _, err := m.srv.CancelJob(m.renter, l.JobID); err != nil {
			t.Fatal(err)
		}
		f.arm("DoneFollowUp", 1) // what stopping between the save and the removal would leave
		if err := m.srv.ReportLease(node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled}); err != nil {
			t.Fatal(err)
		}
		served := func() int64 {
			t.Helper()
			r, err := m.store.FindReputation(context.Background(), idlegrid.SubjectNode, l.NodeID)
			if err != nil {
				t.Fatal(err)
			}
			return r.GPUSecondsServed
		}
		once := served()
		if once <= 0 {
			t.Fatalf("served %d GPU-seconds after the lease ended, want its run", once)
		}
		reapLater(t, m)
		if got := served(); got != once {
			t.Errorf("served %d GPU-seconds after the reaper's turn, want %d: counted once", got, once)
		}
		wantNoFollowUps(t, m)
	})
}
