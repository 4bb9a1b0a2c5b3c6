package sqlstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

func testDisputes(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	r := mustAccount(t, db, idlegrid.RoleRenter)
	bond, err := ledger.Bond(p.ID, 100*idlegrid.MicrosPerUnit, ledger.BondFromWorld, id("key"), t0)
	mustOK(t, err)
	_, err = db.PostTransfer(ctx, bond)
	mustOK(t, err)

	newDispute := func(lease string, state idlegrid.DisputeState) *idlegrid.Dispute {
		return &idlegrid.Dispute{ID: id("dispute"), Offence: "forged_receipt", State: state, ProviderID: p.ID,
			LeaseID: lease, RenterID: r.ID, Evidence: "receipt 3 is not signed by the node", HarmMicros: 5, CreatedAt: t0}
	}
	slash := func(d *idlegrid.Dispute, amount idlegrid.Micros) *idlegrid.Transfer {
		tr, err := ledger.Slash(p.ID, r.ID, amount, d.ID, d.Offence, t0)
		mustOK(t, err)
		d.PenaltyMicros, d.PenaltyTo = amount, "renter"
		return tr
	}
	balances := func() (bond, available idlegrid.Micros) {
		pb, err := db.Balance(ctx, p.ID)
		mustOK(t, err)
		rb, err := db.Balance(ctx, r.ID)
		mustOK(t, err)
		return pb.Bond, rb.Available
	}

	upheld := newDispute("lease_a", idlegrid.DisputeUpheld)
	upheld.Detail = json.RawMessage(`{"receipts":[{"seq":3,"gpu_seconds":120}]}`)
	t.Run("upheld with its penalty", func(t *testing.T) {
		mustOK(t, db.OpenDispute(ctx, upheld, slash(upheld, 30*idlegrid.MicrosPerUnit), nil))
		checkLedger(t, db)
		if b, a := balances(); b != 70*idlegrid.MicrosPerUnit || a != 30*idlegrid.MicrosPerUnit {
			t.Errorf("bond %s, renter available %s; want 70 and 30", b, a)
		}
		got, err := db.FindDispute(ctx, upheld.ID)
		mustOK(t, err)
		if got.State != idlegrid.DisputeUpheld || got.PenaltyMicros != 30*idlegrid.MicrosPerUnit || got.TransferID == "" {
			t.Errorf("stored %+v, want upheld with a 30 penalty and its transfer", got)
		}
		if string(got.Detail) != string(upheld.Detail) {
			t.Errorf("stored detail %s, want %s", got.Detail, upheld.Detail)
		}
	})
	t.Run("the same offence on the same lease twice", func(t *testing.T) {
		again := newDispute("lease_a", idlegrid.DisputeUpheld)
		wantCode(t, db.OpenDispute(ctx, again, slash(again, 10*idlegrid.MicrosPerUnit), nil), idlegrid.ECONFLICT)
		if b, _ := balances(); b != 70*idlegrid.MicrosPerUnit {
			t.Errorf("bond %s after a refused dispute, want 70: no money may move", b)
		}
	})
	t.Run("a penalty above the bond moves nothing and stores nothing", func(t *testing.T) {
		big := newDispute("lease_b", idlegrid.DisputeUpheld)
		wantCode(t, db.OpenDispute(ctx, big, slash(big, 71*idlegrid.MicrosPerUnit), nil), idlegrid.EPAYMENT)
		_, err := db.FindDispute(ctx, big.ID)
		wantCode(t, err, idlegrid.ENOTFOUND)
		checkLedger(t, db)
	})
	t.Run("bad input", func(t *testing.T) {
		noEvidence := newDispute("lease_c", idlegrid.DisputeOpen)
		noEvidence.Evidence = ""
		wantCode(t, db.OpenDispute(ctx, noEvidence, nil, nil), idlegrid.EINVALID)
		open := newDispute("lease_c", idlegrid.DisputeOpen)
		wantCode(t, db.OpenDispute(ctx, open, slash(open, 1), nil), idlegrid.EINVALID) // an open dispute takes nothing
		wrong := newDispute("lease_c", idlegrid.DisputeUpheld)
		tr := slash(wrong, 5)
		wrong.PenaltyMicros = 6 // says one thing, moves another
		wantCode(t, db.OpenDispute(ctx, wrong, tr, nil), idlegrid.EINVALID)
		for field, edit := range map[string]func(d *idlegrid.Dispute){
			"dispute":                func(d *idlegrid.Dispute) { d.Offence = "" },
			"dispute.state":          func(d *idlegrid.Dispute) { d.State = idlegrid.DisputeDismissed },
			"dispute.created_at":     func(d *idlegrid.Dispute) { d.CreatedAt = time.Time{} },
			"dispute.penalty_micros": func(d *idlegrid.Dispute) { d.HarmMicros = -1 },
			"dispute.penalty":        func(d *idlegrid.Dispute) { d.State, d.PenaltyMicros = idlegrid.DisputeUpheld, 5 }, // without its transfer
		} {
			d := newDispute("lease_c", idlegrid.DisputeOpen)
			edit(d)
			wantField(t, db.OpenDispute(ctx, d, nil, nil), field)
			if _, err := db.FindDispute(ctx, d.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
				t.Errorf("a dispute refused for %s was stored (%v)", field, err)
			}
		}
		if b, _ := balances(); b != 70*idlegrid.MicrosPerUnit {
			t.Errorf("bond %s after refused disputes, want 70: no money may move", b)
		}
		checkLedger(t, db)
	})
	open := newDispute("lease_d", idlegrid.DisputeOpen)
	dismissed := newDispute("lease_e", idlegrid.DisputeOpen)
	t.Run("resolve", func(t *testing.T) {
		mustOK(t, db.OpenDispute(ctx, open, nil, nil))
		mustOK(t, db.OpenDispute(ctx, dismissed, nil, nil))
		at := t0.Add(time.Hour)
		tr, err := ledger.Slash(p.ID, "", 20*idlegrid.MicrosPerUnit, open.ID, open.Offence, at)
		mustOK(t, err)
		got, err := db.ResolveDispute(ctx, idlegrid.DisputeResolution{DisputeID: open.ID, To: idlegrid.DisputeUpheld,
			Resolution: "logs agree", By: "acct_admin", Penalty: tr, PenaltyTo: "platform", At: at})
		mustOK(t, err)
		if got.State != idlegrid.DisputeUpheld || got.PenaltyMicros != 20*idlegrid.MicrosPerUnit || got.ResolvedAt == nil {
			t.Errorf("resolved %+v, want upheld with a 20 penalty", got)
		}
		if b, _ := balances(); b != 50*idlegrid.MicrosPerUnit {
			t.Errorf("bond %s, want 50", b)
		}
		_, err = db.ResolveDispute(ctx, idlegrid.DisputeResolution{DisputeID: open.ID, To: idlegrid.DisputeDismissed,
			Resolution: "changed my mind", At: at})
		wantCode(t, err, idlegrid.ECONFLICT)
		got, err = db.ResolveDispute(ctx, idlegrid.DisputeResolution{DisputeID: dismissed.ID, To: idlegrid.DisputeDismissed,
			Resolution: "the renter's image was at fault", By: "acct_admin", At: at})
		mustOK(t, err)
		if got.State != idlegrid.DisputeDismissed || got.PenaltyMicros != 0 {
			t.Errorf("dismissed %+v, want no penalty", got)
		}
		_, err = db.ResolveDispute(ctx, idlegrid.DisputeResolution{DisputeID: "dispute_missing", To: idlegrid.DisputeDismissed,
			Resolution: "x", At: at})
		wantCode(t, err, idlegrid.ENOTFOUND)
		checkLedger(t, db)
	})
	t.Run("audit", func(t *testing.T) {
		// Each dispute is logged as it opened and as it was resolved, beside
		// its penalty's posting; the refused ones left nothing.
		es, err := db.ListAuditEntries(ctx, idlegrid.AuditFilter{Subject: p.ID})
		mustOK(t, err)
		kinds := map[string]int{}
		for _, e := range es {
			kinds[e.Kind]++
		}
		// upheld (1), open and dismissed opened (2) and resolved (2).
		if kinds["trust.dispute"] != 5 {
			t.Errorf("audit entries of kind trust.dispute = %d, want 5 (%v)", kinds["trust.dispute"], kinds)
		}
		// The bond and the two penalties.
		if kinds["ledger.posting"] != 3 {
			t.Errorf("audit entries of kind ledger.posting = %d, want 3 (%v)", kinds["ledger.posting"], kinds)
		}
	})
	t.Run("list", func(t *testing.T) {
		all, err := db.ListDisputes(ctx, idlegrid.DisputeFilter{ProviderID: p.ID})
		mustOK(t, err)
		if len(all) != 3 {
			t.Errorf("ListDisputes(provider) = %d disputes, want 3", len(all))
		}
		ups, err := db.ListDisputes(ctx, idlegrid.DisputeFilter{RenterID: r.ID, States: []idlegrid.DisputeState{idlegrid.DisputeUpheld}})
		mustOK(t, err)
		if len(ups) != 2 {
			t.Errorf("ListDisputes(renter, upheld) = %d disputes, want 2", len(ups))
		}
		var paged []*idlegrid.Dispute // a page at a time, each after the last
		for before := ""; len(paged) <= len(all); {
			page, err := db.ListDisputes(ctx, idlegrid.DisputeFilter{ProviderID: p.ID, Before: before, Limit: 2})
			mustOK(t, err)
			if paged = append(paged, page...); len(page) < 2 {
				break
			}
			before = page[len(page)-1].ID
		}
		if diff := cmp.Diff(all, paged); diff != "" {
			t.Errorf("ListDisputes two at a time (-all +paged):\n%s", diff)
		}
		upheld := []idlegrid.DisputeState{idlegrid.DisputeUpheld}
		for _, tc := range []struct {
			after time.Time
			want  int
		}{{t0.Add(-time.Second), 2}, {t0, 1}, {t0.Add(30 * time.Minute), 1}, {t0.Add(time.Hour), 0}} {
			since, err := db.ListDisputes(ctx, idlegrid.DisputeFilter{ProviderID: p.ID, States: upheld, UpheldAfter: tc.after})
			mustOK(t, err)
			if len(since) != tc.want || tc.want == 1 && since[0].ID != open.ID {
				t.Errorf("ListDisputes(upheld after %v) = %d disputes, want %d: %v", tc.after, len(since), tc.want, since)
			}
		}
		byLease, err := db.ListDisputes(ctx, idlegrid.DisputeFilter{LeaseID: "lease_e"})
		mustOK(t, err)
		if len(byLease) != 1 || byLease[0].ID != dismissed.ID {
			t.Errorf("ListDisputes(lease_e) = %v, want %s alone", byLease, dismissed.ID)
		}
	})
	t.Run("a dismissed dispute does not hold its lease's offence", func(t *testing.T) {
		proven := newDispute("lease_e", idlegrid.DisputeUpheld)
		mustOK(t, db.OpenDispute(ctx, proven, slash(proven, 10*idlegrid.MicrosPerUnit), nil))
		checkLedger(t, db)
	})
	t.Run("no release while a dispute is open", func(t *testing.T) {
		pending := newDispute("lease_f", idlegrid.DisputeOpen)
		mustOK(t, db.OpenDispute(ctx, pending, nil, nil))
		release := func(key string) error {
			tr, err := ledger.ReleaseBond(p.ID, idlegrid.MicrosPerUnit, key, t0)
			mustOK(t, err)
			_, err = db.ReleaseBond(ctx, tr, p.ID)
			return err
		}
		wantCode(t, release("r1"), idlegrid.ECONFLICT)
		before, _ := balances()
		_, err := db.ResolveDispute(ctx, idlegrid.DisputeResolution{DisputeID: pending.ID, To: idlegrid.DisputeDismissed,
			Resolution: "no proof", By: "acct_admin", At: t0.Add(time.Hour)})
		mustOK(t, err)
		mustOK(t, release("r1"))
		mustOK(t, release("r1")) // the same release again: applied once
		if after, _ := balances(); after != before-idlegrid.MicrosPerUnit {
			t.Errorf("bond %s after releasing 1 of %s, want one released once", after, before)
		}
		// A retry answers as the first did, though a dispute opened since.
		mustOK(t, db.OpenDispute(ctx, newDispute("lease_g", idlegrid.DisputeOpen), nil, nil))
		mustOK(t, release("r1"))
		wantCode(t, release("r2"), idlegrid.ECONFLICT)
		if after, _ := balances(); after != before-idlegrid.MicrosPerUnit {
			t.Errorf("bond %s after the retries, want one released once", after)
		}
		checkLedger(t, db)
	})
}
