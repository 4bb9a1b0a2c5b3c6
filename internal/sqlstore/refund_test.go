package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testLeaseRefunds: an upheld dispute refunds the harmed renter from the
// lease's earnings while they are pending, in its penalty's transfer;
// maturing then moves the rest. A refund once they matured, a refund of
// more than is left, and a maturing made before a refund are refused,
// moving nothing; a settlement refunded in full no longer matures.
func testLeaseRefunds(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, p := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleProvider)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	n := mustNode(t, db, p.ID, 3)
	l1, s1 := mustSettled(t, db, r.ID, n, 0, 30*time.Minute)
	l2, s2 := mustSettled(t, db, r.ID, n, 1, 30*time.Minute)
	l3, _ := mustSettled(t, db, r.ID, n, 2, 30*time.Minute)
	earned := ledger.Earned(s1)
	refundOn := func(l *idlegrid.Lease, offence string, amount idlegrid.Micros) (*idlegrid.Dispute, *idlegrid.Transfer) {
		d := &idlegrid.Dispute{ID: id("dispute"), Offence: offence, State: idlegrid.DisputeUpheld, ProviderID: p.ID,
			LeaseID: l.ID, RenterID: r.ID, Evidence: "the re-runs agree on another output", HarmMicros: l.ChargedMicros, CreatedAt: at(time.Hour)}
		tr, err := ledger.Refund(nil, p.ID, r.ID, l.ID, d.ID, offence, amount, at(time.Hour))
		mustOK(t, err)
		tr.ID = id("tx")
		return d, tr
	}
	earnings := func(l *idlegrid.Lease) *idlegrid.LeaseEarnings {
		e, err := db.LeaseEarnings(ctx, l.ID)
		mustOK(t, err)
		return e
	}

	before := mustBalance(t, db, r.ID).Available
	d, tr := refundOn(l1, "mismatched_result", earned/2)
	mustOK(t, db.OpenDispute(ctx, d, tr, nil))
	checkLedger(t, db)
	if got, err := db.FindDispute(ctx, d.ID); err != nil || got.RefundMicros != earned/2 {
		t.Errorf("the dispute stored %+v (%v), want a refund of %s", got, err, earned/2)
	}
	if got := mustBalance(t, db, r.ID).Available - before; got != earned/2 {
		t.Errorf("the renter got %s back, want %s", got, earned/2)
	}
	if e := earnings(l1); e.Earned != earned || e.Refunded != earned/2 || e.Matured || e.Refundable() != earned-earned/2 {
		t.Errorf("lease 1's earnings %+v, want %s earned and %s refunded, pending", e, earned, earned/2)
	}

	// A maturing made before the refund would move all of it: refused.
	wantCode(t, postErr(db, ledger.Mature(s1, 0, at(2*time.Hour))), idlegrid.ECONFLICT)
	_, err := db.PostTransfer(ctx, ledger.Mature(s1, earnings(l1).Refunded, at(2*time.Hour)))
	mustOK(t, err)
	if e := earnings(l1); !e.Matured || e.Refundable() != 0 {
		t.Errorf("lease 1's earnings once matured %+v, want nothing refundable", e)
	}
	late, lateTr := refundOn(l1, "forged_receipt", 1)
	wantCode(t, db.OpenDispute(ctx, late, lateTr, nil), idlegrid.ECONFLICT)
	if _, err := db.FindDispute(ctx, late.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("a refused refund's dispute: %v, want it not stored", err)
	}

	// The platform's fee on lease 1 may still be refunded once its
	// earnings matured, up to the fee less what was refunded of it.
	fee := ledger.Fee(s1)
	if e := earnings(l1); fee <= 0 || e.Fee != fee || e.FeeRefunded != 0 || e.FeeRefundable() != fee {
		t.Fatalf("lease 1's earnings %+v, want a fee of %s, none refunded", e, fee)
	}
	feeOn := func(offence string, amount idlegrid.Micros) (*idlegrid.Dispute, *idlegrid.Transfer) {
		d := &idlegrid.Dispute{ID: id("dispute"), Offence: offence, State: idlegrid.DisputeUpheld, ProviderID: p.ID,
			LeaseID: l1.ID, RenterID: r.ID, Evidence: "a receipt billed unheard time", HarmMicros: l1.ChargedMicros, CreatedAt: at(3 * time.Hour)}
		tr, err := ledger.RefundFee(nil, r.ID, l1.ID, d.ID, offence, amount, at(3*time.Hour))
		mustOK(t, err)
		tr.ID = id("tx")
		return d, tr
	}
	before = mustBalance(t, db, r.ID).Available
	fd, ftr := feeOn("forged_receipt", fee-1)
	mustOK(t, db.OpenDispute(ctx, fd, ftr, nil))
	if got, err := db.FindDispute(ctx, fd.ID); err != nil || got.FeeRefundMicros != fee-1 || got.RefundMicros != 0 {
		t.Errorf("the fee's dispute stored %+v (%v), want a refund of %s of the fee, none of the earnings", got, err, fee-1)
	}
	if got := mustBalance(t, db, r.ID).Available - before; got != fee-1 {
		t.Errorf("the renter got %s of the fee back, want %s", got, fee-1)
	}
	if e := earnings(l1); e.FeeRefunded != fee-1 || e.FeeRefundable() != 1 {
		t.Errorf("lease 1's earnings %+v, want %s of the fee refunded, 1 left", e, fee-1)
	}
	overFee, overFeeTr := feeOn("broken_notice", 2)
	wantCode(t, db.OpenDispute(ctx, overFee, overFeeTr, nil), idlegrid.ECONFLICT)
	checkLedger(t, db)

	// More than is left of lease 3's earnings: refused.
	over, overTr := refundOn(l3, "mismatched_result", earned+1)
	wantCode(t, db.OpenDispute(ctx, over, overTr, nil), idlegrid.ECONFLICT)

	// Lease 2 refunded in full no longer matures; lease 3 still does.
	all, allTr := refundOn(l2, "mismatched_result", earned)
	mustOK(t, db.OpenDispute(ctx, all, allTr, nil))
	got, err := db.ListMaturing(ctx, at(3*time.Hour), 10)
	mustOK(t, err)
	for _, st := range got {
		if st.IdempotencyKey == s2.IdempotencyKey {
			t.Errorf("a settlement refunded in full is listed to mature")
		}
	}
	if len(got) != 1 || got[0].LeaseID != l3.ID {
		t.Errorf("maturing: %d settlements, want lease 3's alone", len(got))
	}
	checkLedger(t, db)
	if b := mustBalance(t, db, p.ID); b.Pending != earned || b.Payable != earned-earned/2 {
		t.Errorf("provider pending %s payable %s, want %s (lease 3's) and %s", b.Pending, b.Payable, earned, earned-earned/2)
	}
}

// postErr posts t, for its error.
func postErr(db *sqlstore.DB, t *idlegrid.Transfer) error {
	_, err := db.PostTransfer(context.Background(), t)
	return err
}
