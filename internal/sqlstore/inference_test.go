package sqlstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

// The inference contract (idlegrid.InferenceStore), on SQLite always and
// on PostgreSQL when IDLEGRID_TEST_POSTGRES is set.
func TestInferenceStore_SQLite(t *testing.T) {
	testInferenceStore(t, func(t *testing.T) string { return sqlstoretest.Path(t) })
}

func TestInferenceStore_Postgres(t *testing.T) {
	testInferenceStore(t, postgresCopies(t))
}

func testInferenceStore(t *testing.T, newDSN func(t *testing.T) string) {
	t.Run("RecordInference", func(t *testing.T) {
		t.Parallel()
		testRecordInference(t, mustOpen(t, newDSN(t)))
	})
	t.Run("RecordInference_Batch", func(t *testing.T) {
		t.Parallel()
		testRecordInferenceBatch(t, func() *sqlstore.DB { return mustOpen(t, newDSN(t)) })
	})
	t.Run("KeyRouting", func(t *testing.T) {
		t.Parallel()
		testKeyRouting(t, mustOpen(t, newDSN(t)))
	})
}

func mustCharge(t *testing.T, id, key string, charge idlegrid.Micros, at time.Time) idlegrid.InferenceCharge {
	t.Helper()
	return chargeOf("r1", "p1", id, key, charge, at)
}

// chargeOf is a metered request of renter's to provider's node n1, and its
// transfer at a 10% fee.
func chargeOf(renter, provider, id, key string, charge idlegrid.Micros, at time.Time) idlegrid.InferenceCharge {
	u := &idlegrid.InferenceUsage{
		ID: id, RenterID: renter, KeyID: key, ProviderID: provider, NodeID: "n1", Model: "m", Endpoint: "chat/completions",
		Stream: true, InputTokens: 10, OutputTokens: 20, Source: idlegrid.UsageUpstream, ChargeMicros: charge,
		LatencyMicros: 1500, TTFTMicros: 300, Attempts: 2, Status: 200, CreatedAt: at,
	}
	var tr *idlegrid.Transfer
	u.FeeMicros, tr = ledger.Rules{FeeBasisPoints: 1000}.Inference(u, at)
	return idlegrid.InferenceCharge{Usage: u, Transfer: tr}
}

func testRecordInference(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	mustOK(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "r1", Name: "renter", Role: idlegrid.RoleRenter, CreatedAt: t0}))
	mustOK(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "p1", Name: "provider", Role: idlegrid.RoleProvider, CreatedAt: t0}))
	top, err := ledger.TopUp("r1", 1000, "first", t0)
	mustOK(t, err)
	_, err = db.PostTransfer(ctx, top)
	mustOK(t, err)

	batch := []idlegrid.InferenceCharge{
		mustCharge(t, "req_1", "k1", 300, at(time.Second)),
		mustCharge(t, "req_2", "k2", 2000, at(2*time.Second)), // more than the renter has
		mustCharge(t, "req_3", "k1", 0, at(3*time.Second)),    // free: a record, no transfer
		mustCharge(t, "req_4", "k2", 500, at(4*time.Second)),
	}
	errs := db.RecordInference(ctx, batch)
	for i, want := range []string{"", idlegrid.EPAYMENT, "", ""} {
		if got := idlegrid.ErrorCode(errs[i]); got != want {
			t.Errorf("charge %d: error %v, want code %q", i, errs[i], want)
		}
	}
	t.Run("a retry changes nothing", func(t *testing.T) {
		for i, err := range db.RecordInference(ctx, batch[:1]) {
			if err != nil {
				t.Errorf("retry %d: %v", i, err)
			}
		}
	})
	t.Run("balances", func(t *testing.T) {
		r, err := db.Balance(ctx, "r1")
		mustOK(t, err)
		if r.Available != 200 {
			t.Errorf("renter available = %d, want 1000-300-500 = 200", r.Available)
		}
		if r.Spent != 800 {
			t.Errorf("renter spent = %d, want the two charges recorded, 300+500 = 800", r.Spent)
		}
		p, err := db.Balance(ctx, "p1")
		mustOK(t, err)
		if p.Pending != 270+450 {
			t.Errorf("provider pending = %d, want 720 (800 less 10%%)", p.Pending)
		}
		sum, err := db.LedgerSum(ctx)
		mustOK(t, err)
		if sum != 0 {
			t.Errorf("ledger sums to %d", sum)
		}
	})
	t.Run("MonthSpend", func(t *testing.T) {
		from, to := idlegrid.MonthOf(t0)
		for key, want := range map[string]idlegrid.Micros{"": 800, "k1": 300, "k2": 500} {
			got, err := db.MonthSpend(ctx, idlegrid.SpendFilter{AccountID: "r1", KeyID: key, From: from, To: to})
			mustOK(t, err)
			if got.ChargedMicros != want {
				t.Errorf("charged this month to key %q = %d, want %d", key, got.ChargedMicros, want)
			}
		}
	})
	t.Run("InferenceTotals", func(t *testing.T) {
		from, to := idlegrid.MonthOf(t0)
		want := &idlegrid.InferenceTotal{Model: "m", Requests: 3, InputTokens: 30, OutputTokens: 60, ChargedMicros: 800, FeesMicros: 80}
		got, err := db.InferenceTotals(ctx, idlegrid.SettlementFilter{RenterID: "r1", From: from, To: to})
		mustOK(t, err)
		if diff := cmp.Diff([]*idlegrid.InferenceTotal{want}, got); diff != "" {
			t.Errorf("renter's totals (-want +got):\n%s", diff)
		}
		byNode := *want
		byNode.NodeID = "n1"
		got, err = db.InferenceTotals(ctx, idlegrid.SettlementFilter{ProviderID: "p1", From: from, To: to})
		mustOK(t, err)
		if diff := cmp.Diff([]*idlegrid.InferenceTotal{&byNode}, got); diff != "" {
			t.Errorf("provider's totals (-want +got):\n%s", diff)
		}
		got, err = db.InferenceTotals(ctx, idlegrid.SettlementFilter{RenterID: "r1", From: to, To: to.AddDate(0, 1, 0)})
		if err != nil || len(got) != 0 {
			t.Errorf("next month's totals = %v, %v; want none", got, err)
		}
		_, err = db.InferenceTotals(ctx, idlegrid.SettlementFilter{RenterID: "r1", ProviderID: "p1", From: from, To: to})
		wantCode(t, err, idlegrid.EINVALID)
	})
	t.Run("ListInferenceUsage", func(t *testing.T) {
		for _, acct := range []string{"r1", "p1"} {
			got, err := db.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: acct, Limit: 10})
			mustOK(t, err)
			if len(got) != 3 || got[0].ID != "req_4" || got[2].ID != "req_1" {
				t.Fatalf("ListInferenceUsage(%s) = %d records, want req_4, req_3, req_1", acct, len(got))
			}
			want := *batch[3].Usage
			want.TransferID = batch[3].Transfer.ID // its own: req_2's overdraft made the batch go one by one
			if g := *got[0]; g != want {
				t.Errorf("stored record\n got %+v\nwant %+v", g, want)
			}
			if got[1].TransferID != "" {
				t.Errorf("free request %s names posting %q, want none", got[1].ID, got[1].TransferID)
			}
			// A page at a time, the same records in the same order.
			var paged []string
			for f := (idlegrid.UsageFilter{AccountID: acct, Limit: 1}); ; {
				page, err := db.ListInferenceUsage(ctx, f)
				mustOK(t, err)
				if len(page) == 0 || len(paged) > 3 {
					break
				}
				paged, f.Before = append(paged, page[0].ID), page[0].ID
			}
			if want := []string{"req_4", "req_3", "req_1"}; !slices.Equal(paged, want) {
				t.Errorf("ListInferenceUsage(%s) a page of one at a time: %v, want %v", acct, paged, want)
			}
		}
		_, err := db.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: "r2", Before: "req_4"})
		if e, ok := err.(*idlegrid.Error); !ok || e.Code != idlegrid.EINVALID || e.Field != "before" {
			t.Errorf("another account's page after req_4: %v, want EINVALID naming before", err)
		}
	})
}
