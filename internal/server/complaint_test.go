package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// TestServer_DisputeByRenter: a renter complains of an offence on a lease
// of its own, naming only the lease; the dispute opens with the lease's
// parties and, by default, what the lease cost as the harm. Another
// renter's lease is not found, and parties that are not the lease's are
// refused. Upheld by an admin, the complaint pays the renter back: from
// the bond, or when there is none, from the lease's pending earnings. A
// lease that ended longer ago than the complaint window is past
// complaining of.
func TestServer_DisputeByRenter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketOn(t, trustpolicy.Default(), func(s idlegrid.Store) idlegrid.Store { return s },
			func(c *server.Config) { c.ComplaintWindow = time.Hour })
		if b := mustAccountBalance(t, m, callerID(m.provider)); b.Bond > 0 {
			if _, err := m.srv.ReleaseBond(m.provider, b.Bond, "none"); err != nil {
				t.Fatal(err)
			}
		}
		l := mustRun(t, m, testSpec(), 30*time.Minute)
		other, _, _, err := m.srv.CreateAccount(m.admin, "rival-lab", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		complaint := idlegrid.Dispute{Offence: "mismatched_result", LeaseID: l.ID, Evidence: "my own re-run on another cloud gives another digest"}
		if _, err := m.srv.OpenDispute(as(other), complaint); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("a complaint about another renter's lease: %v, want ENOTFOUND", err)
		}
		for field, bad := range map[string]func(*idlegrid.Dispute){
			"dispute.lease_id":    func(d *idlegrid.Dispute) { d.LeaseID = "" },
			"dispute.provider_id": func(d *idlegrid.Dispute) { d.ProviderID = other.ID },
			"dispute.renter_id":   func(d *idlegrid.Dispute) { d.RenterID = other.ID },
			"dispute.harm_micros": func(d *idlegrid.Dispute) { d.HarmMicros = l.ChargedMicros + 1 },
		} {
			d := complaint
			bad(&d)
			if _, err := m.srv.OpenDispute(m.renter, d); !isInvalidOn(err, field) {
				t.Errorf("a complaint with a bad %s: %v, want EINVALID naming it", field, err)
			}
		}

		d, replayed, err := m.srv.OpenDisputeOnce(m.renter, complaint, "complaint-1")
		if err != nil || replayed {
			t.Fatalf("the complaint: %+v, %v, %v", d, replayed, err)
		}
		if d.State != idlegrid.DisputeOpen || d.RenterID != m.renterID || d.ProviderID != l.ProviderID || d.NodeID != l.NodeID || d.HarmMicros != l.ChargedMicros {
			t.Errorf("opened %+v, want open, the lease's parties, and the lease's charge %s as the harm", d, l.ChargedMicros)
		}
		if again, replayed, err := m.srv.OpenDisputeOnce(m.renter, complaint, "complaint-1"); err != nil || !replayed || again.ID != d.ID {
			t.Errorf("the complaint sent again: %v, %v, %v; want dispute %s replayed", again, replayed, err, d.ID)
		}
		// A renter's keys are its own: an admin's same key opens another.
		if _, replayed, err := m.srv.OpenDisputeOnce(m.admin, idlegrid.Dispute{Offence: "broken_notice", ProviderID: l.ProviderID,
			Evidence: "x"}, "complaint-1"); err != nil || replayed {
			t.Errorf("an admin's dispute under the renter's key: %v, replayed %v; want its own", err, replayed)
		}
		if ds, err := m.srv.ListDisputes(m.provider, idlegrid.DisputeFilter{States: []idlegrid.DisputeState{idlegrid.DisputeOpen}}); err != nil || len(ds) != 2 {
			t.Errorf("the provider's open disputes: %d (%v), want the complaint and the admin's", len(ds), err)
		}

		before := mustAccountBalance(t, m, m.renterID).Available
		up, err := m.srv.ResolveDispute(m.admin, d.ID, idlegrid.DisputeUpheld, "the re-runs agree with the renter")
		if err != nil {
			t.Fatal(err)
		} else if fee := l.ChargedMicros / 10; up.PenaltyMicros != 0 || up.RefundMicros != l.ChargedMicros-fee || up.FeeRefundMicros != fee {
			t.Errorf("upheld %+v, want no penalty (no bond) and the lease's whole charge %s refunded: its earnings, then the market's fee %s",
				up, l.ChargedMicros, fee) // the test market's fee is 10%
		}
		if got := mustAccountBalance(t, m, m.renterID).Available - before; got != l.ChargedMicros {
			t.Errorf("the renter got %s back, want %s", got, l.ChargedMicros)
		}
		// The provider was told of the complaint, and both of the decision.
		wantNotices(t, m, m.provider, "renter "+m.renterID+" complained of mismatched_result on lease "+l.ID+" (dispute "+d.ID+")",
			"dispute "+d.ID+" (mismatched_result on lease "+l.ID+") was upheld")
		wantNotices(t, m, m.renter, "dispute "+d.ID+" (mismatched_result on lease "+l.ID+") was upheld: "+(l.ChargedMicros-l.ChargedMicros/10).String()+
			" refunded to the renter from the lease's pending earnings, "+(l.ChargedMicros/10).String()+" refunded to the renter from the market's fee on the lease")
		mustLedgerBalanced(t, m.store)

		// A lease that ended longer ago than the window (an hour here) is
		// past complaining of.
		old := mustRun(t, m, testSpec(), time.Minute)
		time.Sleep(time.Hour + time.Minute)
		late := idlegrid.Dispute{Offence: "broken_notice", LeaseID: old.ID, Evidence: "found it in my logs at last"}
		if _, err := m.srv.OpenDispute(m.renter, late); !isInvalidOn(err, "dispute.lease_id") || !strings.Contains(err.Error(), "within 1 hour of") {
			t.Errorf("a complaint an hour after the lease ended: %v, want EINVALID naming dispute.lease_id, within the window", err)
		}
	})
}

// wantNotices fails t unless the caller's notices of kind dispute hold
// each of wants, in some notice.
func wantNotices(t *testing.T, m *testMarket, ctx context.Context, wants ...string) {
	t.Helper()
	ns, err := m.srv.ListNotices(ctx, idlegrid.NoticeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range wants {
		if !slices.ContainsFunc(ns, func(n *idlegrid.Notice) bool {
			return n.Kind == idlegrid.NoticeDispute && strings.Contains(n.Message, want)
		}) {
			t.Errorf("notices of %s: %d, none saying %q", callerID(ctx), len(ns), want)
			for _, n := range ns {
				t.Logf("notice: %s %s", n.Kind, n.Message)
			}
		}
	}
}
