package agent_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
	"github.com/idlegrid/idlegrid/internal/server"
)

// TestAgent_StopSaysGoodbye: an agent that stops tells the server first,
// before it stops and reports its leases: the server then places nothing
// new on the node while it does, and the node is offline rather than
// lost. Its job goes back to the queue and runs on the other node, never
// again on the one that stopped.
func TestAgent_StopSaysGoodbye(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a market and two agents, in real time")
	}
	ctx := context.Background()
	m := mustPartitionMarket(t, server.Config{MissedHeartbeats: 3})
	a := m.startNode(t, "stopping", m.url, nil)
	j, err := m.renter.SubmitJob(ctx, job(3600, nil))
	if err != nil {
		t.Fatal(err)
	}
	first := m.waitLease(t, "the job running on the node to stop", j.ID, func(l *idlegrid.Lease) bool {
		return l.NodeID == a.nodeID && l.State == idlegrid.LeaseRunning
	})
	b := m.startNode(t, "staying", m.url, nil)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if s := m.nodeState(t, a.nodeID); s != idlegrid.NodeOffline {
		t.Errorf("the stopped agent's node is %s, want offline", s)
	}
	if l := m.lease(t, j.ID, first.ID); l.State != idlegrid.LeaseFailed || l.Fault != idlegrid.FaultProvider {
		t.Errorf("the stopped node's lease is %s (fault %q: %s), want failed, the provider's fault", l.State, l.Fault, l.Reason)
	}
	m.waitLease(t, "the job running on the other node", j.ID, func(l *idlegrid.Lease) bool {
		return l.NodeID == b.nodeID && l.State == idlegrid.LeaseRunning
	})
	leases, err := m.renter.ListLeases(ctx, idlegrid.LeaseFilter{JobID: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if l.ID != first.ID && l.NodeID == a.nodeID {
			t.Errorf("lease %s (%s) was placed on the node that had said goodbye", l.ID, l.State)
		}
	}
}

// TestAgent_GoodbyeBeforeReports: the goodbye comes before the reports of
// the leases the agent stops, and a server that cannot take it does not
// keep the agent from stopping.
func TestAgent_GoodbyeBeforeReports(t *testing.T) {
	for _, down := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			r.assign(srv, "lease_a", job(3600, nil))
			waitFor(t, "lease_a to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			if down {
				srv.setDown("Goodbye")
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if got := len(srv.callTimes("Goodbye")); got != 1 {
				t.Fatalf("the agent said goodbye %d times, want once", got)
			}
			if rs := srv.reportsFor("lease_a"); len(rs) == 0 || rs[len(rs)-1].State != idlegrid.LeaseFailed {
				t.Fatalf("lease_a's reports %+v, want its failure last", rs)
			}
			if srv.reportsBeforeGoodbye != 1 { // the running report
				t.Errorf("%d reports came before the goodbye, want only lease_a's running one", srv.reportsBeforeGoodbye)
			}
		})
	}
}

// TestAgent_GoodbyeRefusesWhatItNeverHeardOf: a lease the server placed on
// the node after the agent's last poll for commands, just before its
// goodbye, is failed at once, the node's fault, so that its job goes back
// to the queue now; its workload never starts.
func TestAgent_GoodbyeRefusesWhatItNeverHeardOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := &fakeServer{}, &gpuLedger{Runtime: &rtfake.Runtime{}}
		r := startAgent(t, testConfig(t), srv, rt)
		srv.setDown("Commands") // the agent's polls fail: it never hears of lease_b
		r.assign(srv, "lease_b", job(3600, nil))
		time.Sleep(10 * time.Second)
		srv.setDown()
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		rs := srv.reportsFor("lease_b")
		if len(rs) != 1 || rs[0].State != idlegrid.LeaseFailed || rs[0].Fault != idlegrid.FaultProvider ||
			rs[0].Message != "the node agent was stopping when the lease was placed" {
			t.Errorf("lease_b's reports %+v, want one: failed, the node's fault, as the agent was stopping", rs)
		}
		if !rt.started("lease_b").IsZero() {
			t.Error("lease_b's workload started")
		}
		rt.Close()
	})
}
