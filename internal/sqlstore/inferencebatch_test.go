package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testRecordInferenceBatch records the same charges as one batch into one
// store and one at a time into another, and wants the same errors, usage
// rows and balances in both: the batch's multi-row statements, its one
// posting, and their falling back when a batch cannot go as one, must not
// change what anyone is charged or paid. A batch that fits is one posting,
// with one audit entry; one that falls back posts each charge as one by
// one would.
func testRecordInferenceBatch(t *testing.T, open func() *sqlstore.DB) {
	ctx := context.Background()
	charges := func() []idlegrid.InferenceCharge { // fresh ones: the store sets transfer IDs
		var cs []idlegrid.InferenceCharge
		for i := range 70 { // more than one statement's rows
			cs = append(cs, mustCharge(t, "req_"+string(rune('A'+i%26))+string(rune('a'+i/26)), "k1", idlegrid.Micros(100+i), at(time.Duration(i)*time.Millisecond)))
		}
		return cs
	}
	for _, tt := range []struct {
		name   string
		topUp  idlegrid.Micros
		merged bool // the batch is posted as one
		batch  func(cs []idlegrid.InferenceCharge) []idlegrid.InferenceCharge
	}{
		{"all fit", 1_000_000, true, func(cs []idlegrid.InferenceCharge) []idlegrid.InferenceCharge { return cs }},
		{"the balance runs out half-way", 4000, false, func(cs []idlegrid.InferenceCharge) []idlegrid.InferenceCharge { return cs }},
		{"an ID twice, a free one, an invalid one", 1_000_000, true, func(cs []idlegrid.InferenceCharge) []idlegrid.InferenceCharge {
			free := mustCharge(t, "req_free", "k1", 0, at(time.Second))
			bad := mustCharge(t, "req_bad", "k1", 5, at(time.Second))
			bad.Usage.Model = ""
			return append(cs[:10], cs[3], free, bad)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			batched, single := open(), open()
			var gotErrs, wantErrs []string
			for _, db := range []*sqlstore.DB{batched, single} {
				mustOK(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "r1", Name: "renter", Role: idlegrid.RoleRenter, CreatedAt: t0}))
				mustOK(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "p1", Name: "provider", Role: idlegrid.RoleProvider, CreatedAt: t0}))
				top, err := ledger.TopUp("r1", tt.topUp, "first", t0)
				mustOK(t, err)
				_, err = db.PostTransfer(ctx, top)
				mustOK(t, err)
			}
			codes := func(errs []error) (out []string) {
				for _, err := range errs {
					out = append(out, idlegrid.ErrorCode(err))
				}
				return out
			}
			gotErrs = codes(batched.RecordInference(ctx, tt.batch(charges())))
			for _, c := range tt.batch(charges()) {
				wantErrs = append(wantErrs, codes(single.RecordInference(ctx, []idlegrid.InferenceCharge{c}))...)
			}
			if diff := cmp.Diff(wantErrs, gotErrs); diff != "" {
				t.Errorf("errors (-one by one +batched):\n%s", diff)
			}
			// Again: everything is seen already, and nothing changes.
			for i, err := range batched.RecordInference(ctx, tt.batch(charges())) {
				if code := idlegrid.ErrorCode(err); code != "" && code != gotErrs[i] {
					t.Errorf("retry of charge %d: %v", i, err)
				}
			}
			mustSameInference(t, single, batched)
			mustPostings(t, single, batched, tt.merged)
		})
	}
}

func mustSameInference(t *testing.T, want, got *sqlstore.DB) {
	t.Helper()
	ctx := context.Background()
	for _, acct := range []string{"r1", "p1"} {
		wb, err := want.Balance(ctx, acct)
		mustOK(t, err)
		gb, err := got.Balance(ctx, acct)
		mustOK(t, err)
		if diff := cmp.Diff(wb, gb); diff != "" {
			t.Errorf("balance of %s (-one by one +batched):\n%s", acct, diff)
		}
		wu, err := want.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: acct, Limit: 1000})
		mustOK(t, err)
		gu, err := got.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: acct, Limit: 1000})
		mustOK(t, err)
		if diff := cmp.Diff(wu, gu, cmpopts.IgnoreFields(idlegrid.InferenceUsage{}, "TransferID")); diff != "" {
			t.Errorf("usage of %s (-one by one +batched):\n%s", acct, diff)
		}
		var charged idlegrid.Micros
		for _, u := range gu {
			if u.RenterID == acct {
				charged += u.ChargeMicros
			}
		}
		if gb.Spent != charged {
			t.Errorf("%s spent %d batched, want its usage rows' charges, %d", acct, gb.Spent, charged)
		}
	}
	if sum, err := got.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("ledger sums to %d (%v)", sum, err)
	}
}

// mustPostings checks each store's postings: one audit entry each, every
// charged usage row naming an inference posting of its renter, and the
// batched store's charges posted as one when merged, else one by one.
func mustPostings(t *testing.T, single, batched *sqlstore.DB, merged bool) {
	t.Helper()
	ctx := context.Background()
	count := map[*sqlstore.DB]int{}
	for _, db := range []*sqlstore.DB{single, batched} {
		ts, err := db.ListTransfers(ctx, idlegrid.TransferFilter{AccountID: "r1", Limit: 1000})
		mustOK(t, err)
		inference := map[string]bool{}
		for _, tr := range ts {
			if tr.Kind == idlegrid.TransferInference {
				inference[tr.ID] = true
				count[db]++
			}
		}
		if n, err := db.AuditSize(ctx); err != nil || n != uint64(len(ts)) {
			t.Errorf("audit log has %d entries (%v) for %d postings", n, err, len(ts))
		}
		us, err := db.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: "r1", Limit: 1000})
		mustOK(t, err)
		for _, u := range us {
			if (u.ChargeMicros > 0) != inference[u.TransferID] {
				t.Errorf("usage %s charged %s names posting %q, which is not one of r1's inference postings", u.ID, u.ChargeMicros, u.TransferID)
			}
		}
	}
	switch {
	case merged && count[batched] != 1:
		t.Errorf("batched: %d inference postings, want the batch as one", count[batched])
	case !merged && count[batched] != count[single]:
		t.Errorf("batched: %d inference postings, want %d as one by one", count[batched], count[single])
	}
}
