package ledger_test

import (
	"slices"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

func TestRules_Inference(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name             string
		bps              int64
		charge           idlegrid.Micros
		wantFee, wantNet idlegrid.Micros
		wantNil          bool
	}{
		{name: "ten percent", bps: 1000, charge: 1_000_001, wantFee: 100_000, wantNet: 900_001},
		{name: "a tiny charge goes to the provider", bps: 1000, charge: 9, wantFee: 0, wantNet: 9},
		{name: "no fee", bps: 0, charge: 500, wantFee: 0, wantNet: 500},
		{name: "all fee", bps: 10000, charge: 500, wantFee: 500, wantNet: 0},
		{name: "nothing to charge", bps: 1000, charge: 0, wantNil: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := &idlegrid.InferenceUsage{ID: "req_1", RenterID: "r1", ProviderID: "p1", NodeID: "n1", Model: "m", ChargeMicros: tt.charge}
			fee, tr := ledger.Rules{FeeBasisPoints: tt.bps}.Inference(u, at)
			if tt.wantNil {
				if tr != nil || fee != 0 {
					t.Fatalf("got fee %d and %+v, want nothing", fee, tr)
				}
				return
			}
			if err := tr.Validate(); err != nil {
				t.Fatalf("the transfer does not balance: %v", err)
			}
			got := map[idlegrid.LedgerAccount]idlegrid.Micros{}
			for _, e := range tr.Entries {
				got[e.Account] += e.Amount
			}
			want := map[idlegrid.LedgerAccount]idlegrid.Micros{idlegrid.RenterAvailable("r1"): -tt.charge}
			if tt.wantNet > 0 {
				want[idlegrid.ProviderPending("p1")] = tt.wantNet
			}
			if tt.wantFee > 0 {
				want[idlegrid.PlatformFees] = tt.wantFee
			}
			if fee != tt.wantFee || len(got) != len(want) {
				t.Fatalf("fee %d, entries %v; want fee %d, entries %v", fee, got, tt.wantFee, want)
			}
			for a, m := range want {
				if got[a] != m {
					t.Errorf("entry %s = %d, want %d", a, got[a], m)
				}
			}
			if tr.IdempotencyKey != "inference:req_1" || tr.Kind != idlegrid.TransferInference {
				t.Errorf("key %q kind %q", tr.IdempotencyKey, tr.Kind)
			}
		})
	}
}

// A batch's posting moves what its requests' own transfers would, summed
// per account, under a key no other batch has.
func TestInferenceBatch(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rules := ledger.Rules{FeeBasisPoints: 1000}
	charge := func(id, renter, provider string, micros idlegrid.Micros, d time.Duration) *idlegrid.Transfer {
		u := &idlegrid.InferenceUsage{ID: id, RenterID: renter, ProviderID: provider, Model: "m", NodeID: "n1", ChargeMicros: micros}
		_, tr := rules.Inference(u, at.Add(d))
		return tr
	}
	if got := ledger.InferenceBatch(nil, "req_0"); got != nil {
		t.Errorf("empty batch = %+v, want nil", got)
	}
	one := charge("req_1", "r1", "p1", 1000, 0)
	if got := ledger.InferenceBatch([]*idlegrid.Transfer{one}, "req_1"); got != one {
		t.Errorf("batch of one = %+v, want the request's own transfer", got)
	}
	ts := []*idlegrid.Transfer{one, charge("req_2", "r1", "p2", 2001, time.Second), charge("req_3", "r2", "p1", 500, 2*time.Second)}
	got := ledger.InferenceBatch(ts, "req_1")
	if err := got.Validate(); err != nil {
		t.Fatalf("batch posting invalid: %v", err)
	}
	want := []idlegrid.Entry{
		{Account: idlegrid.PlatformFees, Amount: 100 + 200 + 50},
		{Account: idlegrid.ProviderPending("p1"), Amount: 900 + 450},
		{Account: idlegrid.ProviderPending("p2"), Amount: 1801},
		{Account: idlegrid.RenterAvailable("r1"), Amount: -3001},
		{Account: idlegrid.RenterAvailable("r2"), Amount: -500},
	}
	if !slices.Equal(got.Entries, want) {
		t.Errorf("entries = %v, want %v", got.Entries, want)
	}
	if got.IdempotencyKey != "inference-batch:req_1" || got.Kind != idlegrid.TransferInference ||
		!got.CreatedAt.Equal(at.Add(2*time.Second)) || got.ID == "" || got.ID == one.ID {
		t.Errorf("posting = key %q kind %q at %v id %q; want key inference-batch:req_1, kind inference, the last request's time, an ID of its own",
			got.IdempotencyKey, got.Kind, got.CreatedAt, got.ID)
	}
	if wantMemo := "inference: 3 requests, $0.003501 charged"; got.Memo != wantMemo {
		t.Errorf("memo = %q, want %q", got.Memo, wantMemo)
	}
}
