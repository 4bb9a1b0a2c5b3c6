package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// BenchmarkListNodes_catalog reads what the inference gateway's catalog
// reads every CatalogTTL, in a market of 10,000 online nodes of which 50
// serve a model: the nodes that serve models (serving), against every
// online node (online), which the catalog read before serves_models.
//
//	go test -run '^$' -bench ListNodes_catalog ./internal/sqlstore
func BenchmarkListNodes_catalog(b *testing.B) {
	const nodes, serving = 10_000, 50
	ctx := context.Background()
	db := mustOpen(b, filepath.Join(b.TempDir(), "idlegrid.db"))
	p := mustAccount(b, db, idlegrid.RoleProvider)
	for i := range nodes {
		n := mustNode(b, db, p.ID, 8)
		if i%(nodes/serving) == 0 {
			o := n.Offer
			o.Models = []idlegrid.ModelOffer{{Name: "llama-3.1-8b", InputMicrosPerMTokens: 100_000, OutputMicrosPerMTokens: 200_000, MaxConcurrency: 8}}
			mustOK(b, db.UpdateOffer(ctx, n.ID, o, "v1", t0))
		}
	}
	online := []idlegrid.NodeState{idlegrid.NodeOnline}
	for _, tt := range []struct {
		name string
		f    idlegrid.NodeFilter
		want int
	}{
		{"online", idlegrid.NodeFilter{States: online}, nodes},
		{"serving", idlegrid.NodeFilter{States: online, ServesModels: true}, serving},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				got, err := db.ListNodes(ctx, tt.f)
				if err != nil || len(got) != tt.want {
					b.Fatalf("%d nodes (%v), want %d", len(got), err, tt.want)
				}
			}
		})
	}
}
