package server_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
)

// A restart is short for the market: what went unheard while the server
// was down was said to no one, so its first passes declare no node lost
// and fail no lease for it; a node that stays silent once it is back is
// lost as ever.
func TestServer_RestartKeepsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		l, _ := mustRunningFor(t, m, testSpec(), 0)
		m.srv.Close()
		time.Sleep(20 * time.Minute) // down, longer than any silence the reaper acts on

		srv, err := server.Open(server.Config{Store: m.store, HeartbeatInterval: 10 * time.Second, FeeBasisPoints: 1000, Logger: testLogger})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if err := srv.Reap(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := mustLease(t, m.store, l.ID); got.State != idlegrid.LeaseRunning {
			t.Fatalf("after the restart the lease is %s (%s), want running: its node was silent to no one", got.State, got.Reason)
		}
		time.Sleep(time.Minute) // back, and still silent
		if err := srv.Reap(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := mustLease(t, m.store, l.ID); got.State != idlegrid.LeaseLost {
			t.Errorf("a minute after the restart, with no heartbeat, the lease is %s, want lost", got.State)
		}
	})
}

func mustLease(t *testing.T, store idlegrid.Store, id string) *idlegrid.Lease {
	t.Helper()
	l, err := store.FindLease(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
