package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// BenchmarkDB_PlaceJobs measures the store alone placing one-GPU jobs on
// SQLite, batchSize placements to a transaction, the way the coordinator's
// pass stores them.
//
// Run: go test -run '^$' -bench BenchmarkDB_PlaceJobs ./internal/sqlstore
func BenchmarkDB_PlaceJobs(b *testing.B) {
	const batchSize = 512
	ctx := context.Background()
	db := mustOpen(b, filepath.Join(b.TempDir(), "bench.db"))
	r := mustAccount(b, db, idlegrid.RoleRenter)
	p := mustAccount(b, db, idlegrid.RoleProvider)
	mustTopUp(b, db, r.ID, 1_000_000_000*idlegrid.MicrosPerUnit)
	var nodes []*idlegrid.Node
	for range (b.N + 7) / 8 {
		nodes = append(nodes, mustNode(b, db, p.ID, 8))
	}
	var ps []*idlegrid.Placement
	for i := range b.N {
		j := mustJob(b, db, r.ID, 1, 1)
		ps = append(ps, placement(j, 0, lease(j, nodes[i/8], i%8)))
	}
	b.ResetTimer()
	for len(ps) > 0 {
		n := min(batchSize, len(ps))
		for i, err := range db.PlaceJobs(ctx, ps[:n]) {
			if err != nil {
				b.Fatalf("placement %d: %v", i, err)
			}
		}
		ps = ps[n:]
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "placements/s")
}
