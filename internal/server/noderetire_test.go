package server_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/idlegrid/idlegrid"
)

// Retiring a node takes it out for good: its key is refused, its leases
// end as its failure and their jobs go back to the queue; only its
// provider and admins may.
func TestServer_RetireNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		l, _ := mustStarted(t, m, j)
		other, _, _, err := m.srv.CreateAccount(m.admin, "someone-else", idlegrid.RoleProvider)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.srv.RetireNode(as(other), l.NodeID)
		wantCode(t, err, idlegrid.ENOTFOUND)
		_, err = m.srv.RetireNode(m.renter, l.NodeID)
		wantCode(t, err, idlegrid.EFORBIDDEN)

		n, err := m.srv.RetireNode(m.provider, l.NodeID)
		if err != nil || n.State != idlegrid.NodeRetired {
			t.Fatalf("RetireNode = %+v, %v; want it retired", n, err)
		}
		if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseLost || got.Fault != idlegrid.FaultProvider {
			t.Errorf("its lease = %s (fault %q), want lost, the provider's fault", got.State, got.Fault)
		}
		if got, err := m.srv.FindJob(m.renter, j.ID); err != nil || got.State.Terminal() {
			t.Errorf("its job = %s after %d attempts (%v), want it queued again, or placed again elsewhere", got.State, got.Attempts, err)
		}
		_, _, err = m.srv.NodeIdentity(context.Background(), l.NodeID)
		if idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN || !strings.Contains(err.Error(), "retired") {
			t.Errorf("the retired node's key: %v, want EFORBIDDEN saying it is retired", err)
		}
		// Retired is final: nothing brings it back.
		if err := m.store.SetNodeState(context.Background(), l.NodeID, idlegrid.NodeOnline, m.srv.Now()); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			t.Errorf("setting a retired node online: %v, want ECONFLICT", err)
		}
		if _, err := m.store.Heartbeat(context.Background(), l.NodeID, m.srv.Now()); err == nil {
			t.Error("a retired node's heartbeat was taken")
		}
		if again, err := m.srv.RetireNode(m.admin, l.NodeID); err != nil || again.State != idlegrid.NodeRetired {
			t.Errorf("retiring it again = %+v, %v; want it retired still", again, err)
		}
	})
}
