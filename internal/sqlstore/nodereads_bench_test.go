package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// BenchmarkNodeReads reads the nodes of a market of 10,000 online nodes,
// of which 50 serve a model, as the coordinator's periodic passes do.
// online reads every online node, offers and all: what the inference
// gateway's catalog read every CatalogTTL before serves_models, and the
// reaper twice a pass before OnlineHeartbeats. serving reads the nodes that
// serve models, as the catalog does now; heartbeats the online nodes' last
// heartbeats, as the reaper does now. offers is a renter's first page of
// the market's offers (1,000, oldest first), and cheapest and search the
// same page cheapest first, and filtered by model, memory and price (a
// node in ten asks above the price), as GET /v1/nodes reads them. free is
// the first page of a search for free GPUs: the 5,000 nodes the engine
// named (every other one) as one JSON array of IDs.
//
//	go test -run '^$' -bench NodeReads ./internal/sqlstore
func BenchmarkNodeReads(b *testing.B) {
	const nodes, serving = 10_000, 50
	ctx := context.Background()
	db := mustOpen(b, filepath.Join(b.TempDir(), "idlegrid.db"))
	p := mustAccount(b, db, idlegrid.RoleProvider)
	for i := range nodes {
		n := mustNode(b, db, p.ID, 8)
		o := n.Offer
		o.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: idlegrid.Micros(500_000 + (i*7919)%10*100_000)}
		if i%(nodes/serving) == 0 {
			o.Models = []idlegrid.ModelOffer{{Name: "llama-3.1-8b", InputMicrosPerMTokens: 100_000, OutputMicrosPerMTokens: 200_000, MaxConcurrency: 8}}
		}
		mustOK(b, db.UpdateOffer(ctx, n.ID, o, "v1", t0))
	}
	online := []idlegrid.NodeState{idlegrid.NodeOnline}
	all, err := db.ListNodes(ctx, idlegrid.NodeFilter{})
	mustOK(b, err)
	var half []string
	for i := 0; i < len(all); i += 2 {
		half = append(half, all[i].ID)
	}
	list := func(f idlegrid.NodeFilter) func() (int, error) {
		return func() (int, error) { ns, err := db.ListNodes(ctx, f); return len(ns), err }
	}
	for _, tt := range []struct {
		name string
		read func() (int, error)
		want int
	}{
		{"online", list(idlegrid.NodeFilter{States: online}), nodes},
		{"serving", list(idlegrid.NodeFilter{States: online, ServesModels: true}), serving},
		{"heartbeats", func() (int, error) { m, err := db.OnlineHeartbeats(ctx); return len(m), err }, nodes},
		{"offers", list(idlegrid.NodeFilter{Offered: true, Limit: 1000}), 1000},
		{"cheapest", list(idlegrid.NodeFilter{Offered: true, Tier: idlegrid.TierSilver, Sort: idlegrid.NodesCheapest, Limit: 1000}), 1000},
		{"search", list(idlegrid.NodeFilter{Offered: true, GPUModels: []string{"H100-80GB"}, MinVRAMMB: 81920,
			Tier: idlegrid.TierSilver, MaxFloor: 1_300_000, Sort: idlegrid.NodesCheapest, Limit: 1000}), 1000},
		{"free", list(idlegrid.NodeFilter{Offered: true, IDs: half, Limit: 1000}), 1000},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				if n, err := tt.read(); err != nil || n != tt.want {
					b.Fatalf("%d nodes (%v), want %d", n, err, tt.want)
				}
			}
		})
	}
}
