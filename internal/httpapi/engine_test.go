package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/market"
)

// TestWire_MatchesEngine keeps the wire copies of the engine's answers in
// step with the engine: every field the engine writes must round-trip.
func TestWire_MatchesEngine(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	x := market.Explanation{
		JobID: "job_1", Nodes: 3, Fits: 1, Rejections: map[market.Reason]int{market.ReasonPrice: 2},
		Summary:        "waits",
		CheapestAsks:   []market.AskQuote{{NodeID: "n", NodeName: "rig", Region: "eu-west", GPUModel: "T4", AskMicrosPerGPUHour: 5, Reliability: 0.9, Score: 5.5, Blocker: market.ReasonCapacity}},
		Reservation:    &market.Reservation{JobID: "job_1", Start: at, Nodes: []market.ReservedNode{{NodeID: "n", GPUs: 1}}, Preempting: true},
		EstimatedStart: at, EstimateNote: "soon",
	}
	mustRoundTrip(t, x, &wire.Explanation{})
	stat := market.MarketStat{
		GPUModel: "T4", Region: "eu-west", SupplyGPUs: 4, FreeGPUs: 1, QueuedJobs: 2, QueuedGPUs: 3, FillRate: 0.75,
		Prices:       []market.PricePoint{{At: at, Tier: idlegrid.TierBronze, PriceMicrosPerGPUHour: 90_000, GPUs: 1, JobID: "job_1"}},
		SuggestedAsk: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierBronze: 90_000},
	}
	mustRoundTrip(t, stat, &wire.MarketStat{})
}

func mustRoundTrip(t *testing.T, from, into any) {
	t.Helper()
	want, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("wire type lacks a field the engine writes: %v", err)
	}
	got, err := json.Marshal(into)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("round trip changed the JSON:\n got %s\nwant %s", got, want)
	}
}

func TestAPI_explainAndMarket(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	provider, _, _ := f.mustAccount(t, "gpus", idlegrid.RoleProvider)
	f.mustNode(t, provider, "rig-1")
	renter, acct, _ := f.mustAccount(t, "acme", idlegrid.RoleRenter)
	if _, err := f.Admin.TopUp(ctx, acct.ID, 100*idlegrid.MicrosPerUnit, "t1"); err != nil {
		t.Fatal(err)
	}
	spec := testSpec()
	spec.MaxPriceMicrosPerGPUHour = 1 // below the ask
	j, err := renter.SubmitJob(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	x, err := renter.Explain(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if x.JobID != j.ID || x.Rejections[string(market.ReasonPrice)] != 1 {
		t.Fatalf("explanation = %+v, want the one node rejected for %q", x, market.ReasonPrice)
	}
	stats, err := renter.Market(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].GPUModel != "RTX4090" || stats[0].SupplyGPUs != 1 {
		t.Fatalf("market = %+v, want one RTX4090 in eu-west", stats)
	}
	other, _, _ := f.mustAccount(t, "rival", idlegrid.RoleRenter)
	if _, err := other.Explain(ctx, j.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Fatalf("another renter explains the job: err = %v, want not found", err)
	}
}
