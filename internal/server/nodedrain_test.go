package server_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestServer_DrainNode: a draining node takes no new work, though it asks
// less, and its agent's heartbeats are told so; its bronze lease gets its
// notice and its silver lease runs on; the
// renters' view of the market leaves it out; undone, it takes work again.
// Only its owner and admins may drain it.
func TestServer_DrainNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		rivalID := idlegrid.CallerFromContext(m.rival).NodeID
		if _, err := m.srv.DrainNode(m.provider, rivalID, true); err != nil {
			t.Fatal(err)
		}
		// With barn-2 drained, a bronze and a silver job, one GPU each, both
		// go to barn-1.
		bronze, silver := testSpec(), testSpec()
		bronze.GPUs, bronze.Tier, bronze.MaxPriceMicrosPerGPUHour = 1, idlegrid.TierBronze, 600_000
		silver.GPUs = 1
		for _, spec := range []idlegrid.JobSpec{bronze, silver} {
			if _, err := m.srv.SubmitJob(m.renter, spec); err != nil {
				t.Fatal(err)
			}
		}
		m.advance(t, 5*time.Second)
		leases := startAll(t, m, m.node, 2)
		if cmds, _ := m.srv.Commands(m.rival, 0); len(cmds) != 0 {
			t.Fatalf("the drained node was sent %+v, want nothing", cmds)
		}
		m.advance(t, 10*time.Minute)

		n, err := m.srv.DrainNode(m.provider, m.nodeID, true)
		if err != nil || n.DrainingSince == nil {
			t.Fatalf("drain barn-1: %+v, %v", n, err)
		}
		beat, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{})
		if err != nil || beat.Standing.DrainingSince == nil || !beat.Standing.DrainingSince.Equal(*n.DrainingSince) || beat.Standing.Quarantined {
			t.Fatalf("barn-1's heartbeat answer: %+v, %v; want draining since %v", beat, err, n.DrainingSince)
		}
		synctest.Wait()
		cmds, err := m.srv.Commands(m.node, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) != 1 || cmds[0].Kind != idlegrid.CommandStop || cmds[0].Lease.Tier != idlegrid.TierBronze || cmds[0].Lease.NoticeSeconds != 120 {
			t.Fatalf("commands after the drain: %+v, want the bronze lease's stop with its 120 s notice", cmds)
		}
		for _, l := range leases {
			if l.Tier == idlegrid.TierSilver {
				if got, _, _ := m.srv.FindLease(m.renter, l.ID); got.State != idlegrid.LeaseRunning || got.NoticeAt != nil {
					t.Errorf("the silver lease on the draining node: %s, notice at %v; want it running on", got.State, got.NoticeAt)
				}
			}
		}
		offered, _, err := m.srv.ListNodes(m.renter, idlegrid.NodeFilter{})
		if err != nil || len(offered) != 0 {
			t.Errorf("the renters' view with both nodes draining: %d nodes (%v), want none", len(offered), err)
		}

		queued, err := m.srv.SubmitJob(m.renter, silver)
		if err != nil {
			t.Fatal(err)
		}
		m.advance(t, 5*time.Second)
		if got, _ := m.srv.FindJob(m.renter, queued.ID); got.State != idlegrid.JobQueued {
			t.Fatalf("a job with every node draining: %s, want queued", got.State)
		}
		if _, err := m.srv.DrainNode(m.provider, rivalID, false); err != nil {
			t.Fatal(err)
		}
		m.advance(t, 5*time.Second)
		if started := startAll(t, m, m.rival, 1); started[0].JobID != queued.ID {
			t.Errorf("barn-2, drained no more, started %s, want %s", started[0].JobID, queued.ID)
		}

		renter, other := m.renter, otherProvider(t, m)
		for who, ctx := range map[string]context.Context{"a renter": renter, "another provider": other} {
			if _, err := m.srv.DrainNode(ctx, m.nodeID, false); err == nil {
				t.Errorf("%s undid barn-1's drain", who)
			}
		}
		if n, err := m.srv.DrainNode(m.admin, m.nodeID, false); err != nil || n.DrainingSince != nil {
			t.Errorf("an admin ends barn-1's drain: %+v, %v", n, err)
		}
		if beat, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{}); err != nil || beat.Standing != (idlegrid.NodeStanding{}) {
			t.Errorf("barn-1's heartbeat answer once its drain is undone: %+v, %v; want no standing", beat, err)
		}
	})
}

// startAll reports every start command node has as running, and wants
// there to be want of them.
func startAll(t *testing.T, m *testMarket, node context.Context, want int) []*idlegrid.Lease {
	t.Helper()
	cmds, err := m.srv.Commands(node, 0)
	if err != nil {
		t.Fatal(err)
	}
	var started []*idlegrid.Lease
	for _, c := range cmds {
		if c.Kind != idlegrid.CommandStart {
			continue
		}
		if err := m.srv.ReportLease(node, c.Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
			t.Fatal(err)
		}
		started = append(started, c.Lease)
	}
	if len(started) != want {
		t.Fatalf("%d starts (%+v), want %d", len(started), cmds, want)
	}
	return started
}

// otherProvider is a provider who owns none of m's nodes.
func otherProvider(t *testing.T, m *testMarket) context.Context {
	t.Helper()
	a, _, _, err := m.srv.CreateAccount(m.admin, "elsewhere", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	return as(a)
}

// TestServer_DrainNode_unstartedBronze: a bronze lease its agent has not
// started yet, given notice by a drain, ends preempted and its job waits
// queued again, as a started one's does: notice never cancels a job.
func TestServer_DrainNode_unstartedBronze(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		rivalID := idlegrid.CallerFromContext(m.rival).NodeID
		if _, err := m.srv.DrainNode(m.provider, rivalID, true); err != nil {
			t.Fatal(err)
		}
		bronze := testSpec()
		bronze.GPUs, bronze.Tier, bronze.MaxPriceMicrosPerGPUHour = 1, idlegrid.TierBronze, 600_000
		j, err := m.srv.SubmitJob(m.renter, bronze)
		if err != nil {
			t.Fatal(err)
		}
		m.advance(t, 5*time.Second)
		leases, err := m.srv.ListLeases(m.renter, idlegrid.LeaseFilter{JobID: j.ID})
		if err != nil || len(leases) != 1 || leases[0].State != idlegrid.LeaseAssigned {
			t.Fatalf("the bronze job's leases: %+v (%v), want one assigned", leases, err)
		}
		if _, err := m.srv.DrainNode(m.provider, m.nodeID, true); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got, _, _ := m.srv.FindLease(m.renter, leases[0].ID); got.State != idlegrid.LeasePreempted {
			t.Errorf("the unstarted bronze lease after the drain: %s (%q), want preempted", got.State, got.Reason)
		}
		if got, _ := m.srv.FindJob(m.renter, j.ID); got.State != idlegrid.JobQueued {
			t.Errorf("its job: %s (%q), want queued again", got.State, got.Reason)
		}
	})
}

// A renter's cancel outranks a notice: a bronze job cancelled while its
// lease runs out its notice ends cancelled, not requeued.
func TestServer_CancelDuringNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		rivalID := idlegrid.CallerFromContext(m.rival).NodeID
		if _, err := m.srv.DrainNode(m.provider, rivalID, true); err != nil {
			t.Fatal(err)
		}
		bronze := testSpec()
		bronze.GPUs, bronze.Tier, bronze.MaxPriceMicrosPerGPUHour = 1, idlegrid.TierBronze, 600_000
		j, err := m.srv.SubmitJob(m.renter, bronze)
		if err != nil {
			t.Fatal(err)
		}
		m.advance(t, 5*time.Second)
		l := startAll(t, m, m.node, 1)[0]
		m.advance(t, 10*time.Minute)
		if _, err := m.srv.DrainNode(m.provider, m.nodeID, true); err != nil { // its notice
			t.Fatal(err)
		}
		synctest.Wait()
		if got := mustFindLease(t, m, l.ID); !strings.HasPrefix(got.StopRequested, "notice: ") {
			t.Fatalf("the lease's stop = %q, want its notice", got.StopRequested)
		}
		if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
			t.Fatal(err)
		}
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "stopped"}); err != nil {
			t.Fatal(err)
		}
		if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseCancelled {
			t.Errorf("the lease = %s (%s), want cancelled: the renter's cancel outranks the notice", got.State, got.StopRequested)
		}
		if got, err := m.srv.FindJob(m.renter, j.ID); err != nil || got.State != idlegrid.JobCancelled {
			t.Errorf("the job = %+v (%v), want cancelled, not requeued", got, err)
		}
	})
}
