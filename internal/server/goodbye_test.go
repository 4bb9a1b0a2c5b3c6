package server_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// mustLeavingMarket is a market in which a node is lost after a minute
// without heartbeats, with two one-GPU leases running on m.node
// (mustTwoLeasesOn), whose agent then says goodbye. It returns the leases.
func mustLeavingMarket(t *testing.T) (*testMarket, []*idlegrid.Lease) {
	t.Helper()
	m, leases := mustTwoLeasesOn(t, func(s idlegrid.Store) idlegrid.Store { return s })
	if err := m.srv.Goodbye(m.node); err != nil {
		t.Fatal(err)
	}
	return m, leases
}

// TestServer_Goodbye: a node whose agent says goodbye is offline at once:
// a job that would go to it, the cheaper node, goes to the other instead,
// while the leases it runs stay live for its agent to report. Its next
// heartbeat brings it online, and it takes work again.
func TestServer_Goodbye(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, leases := mustLeavingMarket(t)
		if s := mustNodeState(t, m, m.nodeID); s != idlegrid.NodeOffline {
			t.Fatalf("after its goodbye the node is %s, want offline", s)
		}
		spec := testSpec()
		spec.GPUs = 1
		later, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if l := mustOnlyLease(t, m, later.ID); l.NodeID == m.nodeID {
			t.Errorf("a job submitted after the goodbye was placed on the node that said it")
		}
		for _, l := range leases {
			if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseRunning {
				t.Errorf("lease %s is %s after the goodbye, want running until its agent reports it", l.ID, got.State)
			}
		}
		shutDown := idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider, Message: "the node agent shut down"}
		for _, l := range leases {
			if err := m.srv.ReportLease(m.node, l.ID, shutDown); err != nil {
				t.Fatalf("report of lease %s after the goodbye: %v", l.ID, err)
			}
		}
		if _, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
		if s := mustNodeState(t, m, m.nodeID); s != idlegrid.NodeOnline {
			t.Fatalf("after a heartbeat the node is %s, want online", s)
		}
		back, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if l := mustOnlyLease(t, m, back.ID); l.NodeID != m.nodeID {
			t.Errorf("a job submitted once the node was back went to %s, want the cheaper %s", l.NodeID, m.nodeID)
		}
	})
}

// TestServer_Reap_leavingNodesLeases: a node that said goodbye and went
// silent without reporting every lease is declared lost after the same
// silence as an online node, and the leases it left end lost, the
// provider's fault; the one it reported stays as reported.
func TestServer_Reap_leavingNodesLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, leases := mustLeavingMarket(t)
		reported, left := leases[0], leases[1]
		if err := m.srv.ReportLease(m.node, reported.ID, idlegrid.LeaseReport{State: idlegrid.LeaseFailed,
			Fault: idlegrid.FaultProvider, Message: "the node agent shut down"}); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		time.Sleep(30 * time.Second)
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if s := mustNodeState(t, m, m.nodeID); s != idlegrid.NodeOffline {
			t.Fatalf("within the silence allowed the node is %s, want offline", s)
		}
		if got := mustFindLease(t, m, left.ID); got.State != idlegrid.LeaseRunning {
			t.Fatalf("within the silence allowed the unreported lease is %s, want running", got.State)
		}
		time.Sleep(31 * time.Second)
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if s := mustNodeState(t, m, m.nodeID); s != idlegrid.NodeLost {
			t.Fatalf("silent past the minute allowed, the node is %s, want lost", s)
		}
		if got := mustFindLease(t, m, left.ID); got.State != idlegrid.LeaseLost || got.Fault != idlegrid.FaultProvider || got.ChargedMicros != 0 {
			t.Errorf("the unreported lease is %s (fault %q, %q) charged %s, want lost by the provider's fault, charged nothing",
				got.State, got.Fault, got.Reason, got.ChargedMicros)
		}
		if got := mustFindLease(t, m, reported.ID); got.State != idlegrid.LeaseFailed || got.Reason != "the node agent shut down" {
			t.Errorf("the reported lease is %s (%q), want failed as reported", got.State, got.Reason)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// mustOnlyLease returns the one lease of the job.
func mustOnlyLease(t *testing.T, m *testMarket, jobID string) *idlegrid.Lease {
	t.Helper()
	leases, err := m.store.ListLeases(context.Background(), idlegrid.LeaseFilter{JobID: jobID})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 {
		t.Fatalf("job %s has %d leases, want 1", jobID, len(leases))
	}
	return leases[0]
}
