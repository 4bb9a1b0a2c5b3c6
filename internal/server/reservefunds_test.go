package server_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/idlegrid/idlegrid"
)

// TestServer_UnpaidJobKeepsNoReservation: a job reserves the only node
// within its cap while another job runs there. When that job ends early,
// the engine would place the reserved job, but its renter cannot pay, so
// the scheduler keeps it queued waiting for funds. Its reservation ends
// with that (the engine forgets the job): another renter's job that runs
// past the reservation's start takes the freed GPUs at once, rather than
// waiting for the next resync.
func TestServer_UnpaidJobKeepsNoReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, running := mustStart(t, m) // both of barn-1's GPUs, for an hour
		poor, _, _, err := m.srv.CreateAccount(m.admin, "poor", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		spec := testSpec()
		spec.MaxPriceMicrosPerGPUHour = 450_000 // below barn-2's ask: only barn-1 will do
		spec.DurationSeconds = 3 * 3600
		unpaid, err := m.srv.SubmitJob(as(poor), spec)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if j, _ := m.srv.FindJob(as(poor), unpaid.ID); j.State != idlegrid.JobQueued || !strings.Contains(j.Reason, "2 GPUs on barn-1 ("+m.nodeID+")") {
			t.Fatalf("job = %s (%q), want queued with barn-1 reserved for it", j.State, j.Reason)
		}

		code := 0
		if err := m.srv.ReportLease(m.node, running.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mustReasonWaitsForMoney(t, m, as(poor), unpaid.ID)

		next, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := mustStarted(t, m, next); l.NodeID != m.nodeID {
			t.Fatalf("job %s started on %s, want barn-1 (%s)", next.ID, l.NodeID, m.nodeID)
		}
		if j, _ := m.srv.FindJob(as(poor), unpaid.ID); j.State != idlegrid.JobQueued {
			t.Fatalf("job = %s (%q), want it still queued", j.State, j.Reason)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// TestServer_UnfitReservationEnds: a job reserves barn-1, the only node
// within its cap, while another job runs there; then barn-1's owner asks
// more than that cap. At the next pass the job no longer fits its
// reservation and waits, and the scheduler commits that decision, which
// ends the reservation: once the running job ends, a job that can pay the
// new ask takes the GPUs at once.
func TestServer_UnfitReservationEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, running := mustStart(t, m) // both of barn-1's GPUs, for an hour
		spec := testSpec()
		spec.MaxPriceMicrosPerGPUHour = 450_000 // below barn-2's ask: only barn-1 will do
		spec.DurationSeconds = 3 * 3600
		reserved, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if j := mustFindJob(t, m, reserved.ID); j.State != idlegrid.JobQueued || !strings.Contains(j.Reason, "2 GPUs on barn-1 ("+m.nodeID+")") {
			t.Fatalf("job = %s (%q), want queued with barn-1 reserved for it", j.State, j.Reason)
		}

		dearer := testOffer("barn-1")
		dearer.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 480_000
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: dearer}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		code := 0
		if err := m.srv.ReportLease(m.node, running.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		spec.MaxPriceMicrosPerGPUHour = 490_000 // barn-1's new ask, still below barn-2's
		next, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := mustStarted(t, m, next); l.NodeID != m.nodeID {
			t.Fatalf("job %s started on %s, want barn-1 (%s)", next.ID, l.NodeID, m.nodeID)
		}
		if j := mustFindJob(t, m, reserved.ID); j.State != idlegrid.JobQueued {
			t.Fatalf("job = %s (%q), want it still queued", j.State, j.Reason)
		}
	})
}
