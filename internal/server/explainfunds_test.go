package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// mustExplain submits spec as caller, lets the scheduler look at it and
// explains it.
func mustExplain(t *testing.T, m *testMarket, caller context.Context, spec idlegrid.JobSpec) (*idlegrid.Job, *market.Explanation) {
	t.Helper()
	j, err := m.srv.SubmitJob(caller, spec)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	x, err := m.srv.Explain(caller, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	return j, x
}

// wantWaitsForMoney fails unless x says the job waits for money (summary
// begins with prefix), gives no estimated start and advises advice.
func wantWaitsForMoney(t *testing.T, x *market.Explanation, prefix, advice string) {
	t.Helper()
	if !strings.HasPrefix(x.Summary, prefix) || strings.Contains(x.Summary, "it can start now") {
		t.Errorf("summary = %q, want it to begin %q", x.Summary, prefix)
	}
	if !x.EstimatedStart.IsZero() || !strings.HasPrefix(x.EstimateNote, "unknown: it starts at the first placement pass after the renter can pay") {
		t.Errorf("estimate = %v (%q), want none until the renter can pay", x.EstimatedStart, x.EstimateNote)
	}
	if !strings.Contains(strings.Join(x.Advice, "\n"), advice) {
		t.Errorf("advice = %q, want %q", x.Advice, advice)
	}
}

// mustReasonWaitsForMoney fails unless the scheduler's reason for the
// job says it waits for money as the engine knows such reasons
// (market.WaitsForMoney), which its queue ahead leaves out.
func mustReasonWaitsForMoney(t *testing.T, m *testMarket, caller context.Context, jobID string) {
	t.Helper()
	j, err := m.srv.FindJob(caller, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != idlegrid.JobQueued || !market.WaitsForMoney(j.Reason) {
		t.Fatalf("job = %s (%q), want it queued waiting for money", j.State, j.Reason)
	}
}

// TestServer_ExplainWaitsForFunds: a renter with nothing available submits
// a job that nodes would take now. The scheduler keeps it queued "waiting
// for funds"; its explanation said it could start now at the next pass.
// It says what the hold would be, that nothing is available, and how to
// top up, with no estimated start.
func TestServer_ExplainWaitsForFunds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		poor, _, _, err := m.srv.CreateAccount(m.admin, "poor", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		j, x := mustExplain(t, m, as(poor), testSpec())
		mustReasonWaitsForMoney(t, m, as(poor), j.ID)
		wantWaitsForMoney(t, x, "waiting for funds: its escrow hold would be $", "'idlegrid account topup "+poor.ID+" AMOUNT'")
		if !strings.Contains(x.Summary, "the renter has $0.000000 available") {
			t.Errorf("summary = %q, want it to say what is available", x.Summary)
		}
	})
}

// TestServer_ExplainWaitsForSpendLimit: the store refuses a placement that
// would pass the account's or the submitting key's monthly limit, and the
// explanation says which limit, that nothing used reaches it but the hold
// would exceed it, and how to raise or lift it, or to hold what is left.
func TestServer_ExplainWaitsForSpendLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		key, k := mustKeyAs(t, m, m.renter, idlegrid.AccessUse)
		cents := idlegrid.MicrosPerUnit / 100
		if _, err := m.srv.SetKeyLimit(m.renter, k.ID, &cents); err != nil {
			t.Fatal(err)
		}
		j, x := mustExplain(t, m, key, testSpec())
		mustReasonWaitsForMoney(t, m, key, j.ID)
		wantWaitsForMoney(t, x, "waiting: spend limit of API key "+k.ID+" would be exceeded: $0.010000 a month, $0.000000 used in ", "a key of the account with access all (a key of access use may not) runs 'idlegrid key limit "+k.ID+" AMOUNT'")
		wantWaitsForMoney(t, x, "waiting: spend limit of", "submit the job again to hold at most $0.010000")
		if strings.Contains(x.Summary, "reached") {
			t.Errorf("summary = %q, want no limit reached with nothing used", x.Summary)
		}

		if _, err := m.srv.SetAccountLimit(m.admin, m.renterID, &cents); err != nil {
			t.Fatal(err)
		}
		_, x = mustExplain(t, m, m.renter, testSpec())
		wantWaitsForMoney(t, x, "waiting: spend limit of account "+m.renterID+" would be exceeded", "'idlegrid account limit "+m.renterID+" AMOUNT'")
		if strings.Contains(x.Summary, "reached") {
			t.Errorf("summary = %q, want no limit reached with nothing used", x.Summary)
		}
	})
}

// TestServer_ExplainSpendLimitReached: a limit that what the month used
// already comes to is reached, whatever the next placement would hold,
// and the advice is to raise or lift it, not to hold less.
func TestServer_ExplainSpendLimitReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, l := mustStart(t, m) // holds its hour on barn-1
		cents := idlegrid.MicrosPerUnit / 100
		if _, err := m.srv.SetAccountLimit(m.admin, m.renterID, &cents); err != nil {
			t.Fatal(err)
		}
		_, x := mustExplain(t, m, m.renter, testSpec()) // barn-2 would take it
		wantWaitsForMoney(t, x, fmt.Sprintf("waiting: spend limit of account %s reached: $0.010000 a month, %s used in ", m.renterID, l.HoldMicros),
			"'idlegrid account limit "+m.renterID+" AMOUNT'")
		if advice := strings.Join(x.Advice, "\n"); strings.Contains(advice, "hold at most") {
			t.Errorf("advice = %q, want no smaller hold offered under a limit reached", advice)
		}
	})
}

// TestServer_ExplainQueueAheadSkipsUnpaid: a job queued ahead that waits
// for funds takes no node, so the estimate of a job behind it does not
// count it among the jobs ahead.
func TestServer_ExplainQueueAheadSkipsUnpaid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		mustStart(t, m) // on barn-1, the cheaper node, for an hour
		poor, _, _, err := m.srv.CreateAccount(m.admin, "poor", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.srv.SubmitJob(as(poor), testSpec()); err != nil { // barn-2 would take it, unpaid
			t.Fatal(err)
		}
		m.advance(t, time.Second) // the next job arrives after it, so it is queued behind it
		spec := testSpec()
		spec.MaxPriceMicrosPerGPUHour = 450_000 // below barn-2's ask: only busy barn-1 will do
		// Due before barn-1 frees up, so nothing is reserved for it and its
		// estimate counts the queue ahead.
		deadline := time.Now().Add(30 * time.Minute)
		spec.DurationSeconds, spec.Deadline = 600, &deadline
		_, x := mustExplain(t, m, m.renter, spec)
		if x.EstimatedStart.IsZero() || strings.Contains(x.EstimateNote, "ahead of it") {
			t.Errorf("estimate = %v (%q), want barn-1's lease end, with no job ahead", x.EstimatedStart, x.EstimateNote)
		}
	})
}
