package ledger_test

import (
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
