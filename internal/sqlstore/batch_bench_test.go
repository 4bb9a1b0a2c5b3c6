package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/cputime"
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
	cpu0, _ := cputime.Process()
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
	if cpu1, ok := cputime.Process(); ok {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/placement")
	}
}

// BenchmarkDB_CreateJob measures the store alone taking job submissions on
// SQLite from several goroutines at once, as the HTTP handlers would: each
// call returns once its job is committed. ",keyed": each job carries an
// idempotency key of its own, as those of 'idlegrid job submit' do.
//
// Run: go test -run '^$' -bench BenchmarkDB_CreateJob ./internal/sqlstore
func BenchmarkDB_CreateJob(b *testing.B) {
	for _, bench := range []struct {
		submitters int
		keyed      bool // each job has an idempotency key, as idlegrid job submit sends
	}{{1, false}, {4, false}, {64, false}, {64, true}} {
		name := fmt.Sprintf("submitters=%d", bench.submitters)
		if bench.keyed {
			name += ",keyed"
		}
		submitters := bench.submitters
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			db := mustOpen(b, filepath.Join(b.TempDir(), "bench.db"))
			r := mustAccount(b, db, idlegrid.RoleRenter)
			jobs := make([]*idlegrid.Job, b.N)
			for i := range jobs {
				jobs[i] = newJob(r.ID, 1, 1)
				if bench.keyed {
					jobs[i].IdempotencyKey = fmt.Sprintf("sub-%d", i)
				}
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			cpu0, _ := cputime.Process()
			b.ResetTimer()
			for range submitters {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < int64(len(jobs)); i = next.Add(1) - 1 {
						if err := db.CreateJob(ctx, jobs[i]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			if cpu1, ok := cputime.Process(); ok {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/job")
			}
		})
	}
}
