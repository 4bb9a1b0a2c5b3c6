package server_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestServer_Reap_leases runs the reaper's lease rules on leases placed by
// hand (their job asks for a GPU no node has, so the scheduler leaves it
// alone): a lease never started is lost; one past its time limit is asked
// to stop; one whose notice ran out unconfirmed ends preempted; one whose
// stop its node never confirmed ends cancelled.
func TestServer_Reap_leases(t *testing.T) {
	for _, tt := range []struct {
		name          string
		start         bool
		limit, notice int64 // seconds
		stop          string
		wait          time.Duration
		check         func(l *idlegrid.Lease) bool
		want          string
	}{
		{name: "never started", limit: 3600, wait: 2*time.Minute + 15*time.Second,
			check: func(l *idlegrid.Lease) bool {
				return l.State == idlegrid.LeaseLost && strings.Contains(l.Reason, "did not start the lease within 2m0s")
			},
			want: "lost: the node did not start the lease within 2m0s"},
		{name: "past its limit", start: true, limit: 60, wait: 60*time.Second + 45*time.Second,
			check: func(l *idlegrid.Lease) bool {
				return l.State == idlegrid.LeaseRunning && l.StopRequested == "time limit of 60s reached"
			},
			want: "running, asked to stop: time limit of 60s reached"},
		{name: "notice unconfirmed", start: true, limit: 3600, notice: 120, stop: "notice: preempted for a gold job",
			wait: 120*time.Second + 45*time.Second,
			check: func(l *idlegrid.Lease) bool {
				return l.State == idlegrid.LeasePreempted && strings.Contains(l.Reason, "did not confirm the stop within the notice")
			},
			want: "preempted: the node did not confirm the stop within the notice"},
		{name: "stop unconfirmed", start: true, limit: 3600, stop: "cancelled by its renter",
			wait: 2 * time.Minute,
			check: func(l *idlegrid.Lease) bool {
				return l.State == idlegrid.LeaseCancelled && l.Reason == "cancelled by its renter; the node did not confirm the stop"
			},
			want: "cancelled: the node did not confirm the stop"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMoneyMarket(t)
				ctx := context.Background()
				l := mustLeaseByHand(t, m, tt.limit, tt.notice)
				if tt.start {
					if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
						t.Fatal(err)
					}
				}
				if tt.stop != "" {
					if err := m.store.RequestLeaseStop(ctx, l.ID, tt.stop, m.srv.Now()); err != nil {
						t.Fatal(err)
					}
				}
				m.advance(t, tt.wait/2)
				if got := mustFindLease(t, m, l.ID); tt.check(got) {
					t.Fatalf("halfway, the lease is already %s (%q, stop %q)", got.State, got.Reason, got.StopRequested)
				}
				m.advance(t, tt.wait-tt.wait/2)
				if got := mustFindLease(t, m, l.ID); !tt.check(got) {
					t.Fatalf("lease is %s (%q, stop %q), want %s", got.State, got.Reason, got.StopRequested, tt.want)
				}
			})
		})
	}
}

// mustPlaceByHand stores job j placed as lease l, now, holding l's
// HoldMicros of j's renter: what the coordinator stores for a placement,
// for a job the scheduler leaves alone (one that asks for a GPU no node
// has).
func mustPlaceByHand(t *testing.T, m *testMarket, j *idlegrid.Job, l *idlegrid.Lease) {
	t.Helper()
	now := m.srv.Now()
	p := &idlegrid.Placement{JobID: j.ID, Leases: []*idlegrid.Lease{l}, At: now, Transfers: []*idlegrid.Transfer{{
		IdempotencyKey: "hold:" + l.ID, Kind: idlegrid.TransferHold, LeaseID: l.ID, CreatedAt: now,
		Entries: []idlegrid.Entry{
			{Account: idlegrid.RenterAvailable(j.RenterID), Amount: -l.HoldMicros},
			{Account: idlegrid.RenterHeld(j.RenterID), Amount: l.HoldMicros},
		},
	}}}
	if err := m.store.PlaceJob(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// TestServer_HeartbeatNamesEndedLeases: a node declared lost while its
// network was down comes back with its lease still running; the lease
// ended when the node was lost, so no command will stop it, and the
// heartbeat's answer names it for the agent to stop.
func TestServer_HeartbeatNamesEndedLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		node, l := m.runningLease(t)
		time.Sleep(time.Minute) // no heartbeats: the node is lost
		if err := m.srv.Reap(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseLost {
			t.Fatalf("the lease after its node went silent: %s, want lost", got.State)
		}
		resp, err := m.srv.Heartbeat(node, idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{{LeaseID: l.ID, Progress: 0.5}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Ended) != 1 || resp.Ended[0].LeaseID != l.ID || resp.Ended[0].State != idlegrid.LeaseLost {
			t.Errorf("the heartbeat's answer names %+v, want %s lost", resp.Ended, l.ID)
		}
		if resp, _ := m.srv.Heartbeat(node, idlegrid.HeartbeatRequest{}); len(resp.Ended) != 0 {
			t.Errorf("a heartbeat that reports no lease is told of %+v", resp.Ended)
		}
	})
}

// TestServer_HeartbeatNamesUnknownLeases: a heartbeat that reports a lease
// the server has no record of for the node (a database restored from an
// older backup) still counts, records the other leases' progress, and
// names the unknown one for the agent to stop; it does not fail, which
// would hide, on every heartbeat, the leases that did end.
func TestServer_HeartbeatNamesUnknownLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		node, l := m.runningLease(t)
		resp, err := m.srv.Heartbeat(node, idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{
			{LeaseID: "lease_restoredaway", Progress: 0.9}, {LeaseID: l.ID, Progress: 0.5},
		}})
		if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		if len(resp.Ended) != 1 || resp.Ended[0].LeaseID != "lease_restoredaway" || resp.Ended[0].State != idlegrid.LeaseFailed {
			t.Errorf("the heartbeat's answer names %+v, want lease_restoredaway to stop", resp.Ended)
		}
		if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseRunning || got.Progress != 0.5 {
			t.Errorf("the known lease after the heartbeat: %s at %v, want running at 0.5", got.State, got.Progress)
		}
	})
}
