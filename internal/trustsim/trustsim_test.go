package trustsim_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/idlegrid/idlegrid/internal/trustsim"
)

func mustRun(tb testing.TB, cfg trustsim.Config) *trustsim.Report {
	tb.Helper()
	cfg.Dir = tb.TempDir()
	r, err := trustsim.Run(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func rowOf(tb testing.TB, r *trustsim.Report, b trustsim.Behaviour) trustsim.Row {
	tb.Helper()
	for _, row := range r.Rows {
		if row.Behaviour == b {
			return row
		}
	}
	tb.Fatalf("no row for %s in %+v", b, r.Rows)
	return trustsim.Row{}
}

// TestRun checks the mechanism on a small market: every cheating
// behaviour is flagged at least once, by the signal meant for it, and no
// honest provider is. bills-offline is caught by its receipts against the
// heartbeats heard: a forged-receipt conviction or, on a lease with one
// inconsistent receipt, its score.
func TestRun(t *testing.T) {
	r := mustRun(t, trustsim.Config{Providers: 30, Cheaters: 0.5, Seed: 1, Leases: 12})
	if got := rowOf(t, r, trustsim.Honest); got.Flagged != 0 || got.FlaggedLater != 0 || got.Providers != 15 {
		t.Errorf("honest = %+v, want 15 providers, none flagged", got)
	}
	wantSignal := map[trustsim.Behaviour]string{
		trustsim.LiesGPU:          "dispute:fake_hardware",
		trustsim.InflatesReceipts: "dispute:forged_receipt",
		trustsim.DropsJobs:        "score",
		trustsim.FakesUptime:      "dispute:mismatched_result",
	}
	for b, signal := range wantSignal {
		got := rowOf(t, r, b)
		if got.Providers != 3 {
			t.Errorf("%s: %d providers, want 3 (15 cheaters dealt over 5 behaviours)", b, got.Providers)
		}
		if got.Flagged+got.FlaggedLater == 0 || got.Signals[signal] == 0 {
			t.Errorf("%s = %+v, want at least one flagged by %s", b, got, signal)
		}
	}
	if got := rowOf(t, r, trustsim.BillsOffline); got.Providers != 3 || got.Flagged+got.FlaggedLater == 0 ||
		got.Signals["dispute:forged_receipt"]+got.Signals["score"] == 0 {
		t.Errorf("bills-offline = %+v, want 3 providers, at least one flagged by its receipts", got)
	}
	if r.LeasesTotal < 15*12 {
		t.Errorf("%d leases in all, want at least the honest providers' 15×12", r.LeasesTotal)
	}
}

func TestRun_Deterministic(t *testing.T) {
	cfg := trustsim.Config{Providers: 15, Cheaters: 0.5, Seed: 3, Leases: 4}
	a, b := mustRun(t, cfg), mustRun(t, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of seed 3 differ:\n%+v\n%+v", a, b)
	}
}

func TestRun_Invalid(t *testing.T) {
	for _, cfg := range []trustsim.Config{{Providers: 2}, {Cheaters: 1.5}, {Verifiable: 2}, {FlagScore: 1.5}} {
		if _, err := trustsim.Run(context.Background(), cfg); err == nil {
			t.Errorf("Run(%+v) = nil error, want one naming the field", cfg)
		}
	}
}
