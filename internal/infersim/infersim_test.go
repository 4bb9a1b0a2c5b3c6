package infersim_test

import (
	"context"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/infersim"
)

// TestRun replays the first rows of both traces, fast, against a provider
// that fails every request and one that never fails, through the real
// coordinator, gateway and agents.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator and agents")
	}
	code := mustTrace(t, "testdata/code_head.csv", "code")
	conv := mustTrace(t, "testdata/conv_head.csv", "conv")
	reqs := infersim.Merge(infersim.Slice{Requests: 48}, code, conv)
	good := infersim.ProviderSpec{Name: "good", GPU: "H100-80GB", Region: "eu-west", Residency: "EU", InputPrice: "0.30", OutputPrice: "1.20", MaxConcurrency: 1000}
	bad := infersim.ProviderSpec{Name: "bad", GPU: "RTX4090", Region: "us-east", Residency: "US", InputPrice: "0.01", OutputPrice: "0.02", MaxConcurrency: 1000,
		Faults: infersim.Faults{Error500: 1}}
	rep, err := infersim.Run(context.Background(), infersim.Config{
		Requests: reqs, Speedup: 1000, ServiceSpeedup: 1000, Seed: 3,
		Fleet: []infersim.ProviderSpec{bad, good},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != len(reqs) || rep.Served != len(reqs) {
		t.Fatalf("served %d of %d requests (errors %v), want all: the good provider never fails", rep.Served, rep.Requests, rep.Errors)
	}
	if rep.Streamed == 0 || rep.Streamed == len(reqs) {
		t.Errorf("streamed %d of %d, want a mix", rep.Streamed, len(reqs))
	}
	byName := map[string]infersim.ProviderReport{}
	for _, p := range rep.Providers {
		byName[p.Name] = p
	}
	b, g := byName["bad"], byName["good"]
	t.Logf("bad provider: %d calls; failovers %d; breaker trips %d", b.Calls, rep.Failovers, rep.BreakerTrips)
	t.Run("Failover", func(t *testing.T) {
		if b.Calls == 0 || b.Served != 0 || b.Faults["500"] != b.Calls {
			t.Fatalf("bad provider: %d calls, %d served, faults %v; want calls, each a 500", b.Calls, b.Served, b.Faults)
		}
		// Every call to the bad provider failed over to the good one.
		if rep.Failovers != b.Calls || rep.ExtraAttempts != b.Calls {
			t.Errorf("got %d failovers, %d extra attempts; want %d each, one per call to the bad provider", rep.Failovers, rep.ExtraAttempts, b.Calls)
		}
		// The gateway's own count: every call to the bad provider failed,
		// so it tripped once it had BreakerFailures (5) of them, and the
		// good provider's never did.
		if b.Calls >= 5 && b.BreakerTrips == 0 {
			t.Errorf("%d failures in a row and no breaker trip counted", b.Calls)
		}
		if b.Calls < 5 && b.BreakerTrips != 0 {
			t.Errorf("%d failures and %d breaker trips; fewer than 5 cannot trip it", b.Calls, b.BreakerTrips)
		}
		if g.BreakerTrips != 0 || rep.BreakerTrips != b.BreakerTrips {
			t.Errorf("breaker trips: good %d, all %d; want none for the good provider, all the bad one's", g.BreakerTrips, rep.BreakerTrips)
		}
		if g.Served != len(reqs) {
			t.Errorf("good provider served %d, want %d", g.Served, len(reqs))
		}
	})
	t.Run("Ledger", func(t *testing.T) {
		var in, out int64
		var want idlegrid.Micros
		offer := idlegrid.ModelOffer{InputMicrosPerMTokens: mustMicros(t, good.InputPrice), OutputMicrosPerMTokens: mustMicros(t, good.OutputPrice)}
		for _, r := range reqs {
			pi, po := int64(max(r.ContextTokens, 1)), int64(max(r.GeneratedTokens, 1))
			in, out = in+pi, out+po
			want += offer.Cost(pi, po)
		}
		if rep.MeteredInput != in || rep.MeteredOutput != out {
			t.Errorf("metered %d in, %d out; want the trace's %d, %d", rep.MeteredInput, rep.MeteredOutput, in, out)
		}
		if rep.ChargedMicros != want || rep.UsageChargedMicros != want {
			t.Errorf("ledger charged %s, usage records %s; want %s, the trace's tokens at the good provider's prices", rep.ChargedMicros, rep.UsageChargedMicros, want)
		}
		if rep.FeeMicros != rep.UsageFeeMicros || rep.FeeMicros <= 0 || b.EarnedMicros != 0 || g.EarnedMicros != rep.EarnedMicros {
			t.Errorf("fee %s (records %s), earned bad %s good %s of %s; want the records' fee, all earnings the good provider's",
				rep.FeeMicros, rep.UsageFeeMicros, b.EarnedMicros, g.EarnedMicros, rep.EarnedMicros)
		}
		var perSvc idlegrid.Micros
		for _, s := range rep.Services {
			perSvc += s.ChargedMicros
		}
		if perSvc != rep.ChargedMicros || len(rep.Services) != 2 {
			t.Errorf("services %+v charged %s in all, want 2 adding to %s", rep.Services, perSvc, rep.ChargedMicros)
		}
	})
}

func mustMicros(tb testing.TB, s string) idlegrid.Micros {
	tb.Helper()
	m, err := idlegrid.ParseMicros(s)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}
