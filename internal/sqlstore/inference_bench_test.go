package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/cputime"
)

// BenchmarkDB_RecordInference measures the store alone recording the
// gateway's metered requests on SQLite, batch charges to a call, as the
// gateway's meter hands them over (one at a time when requests are rare,
// a dozen at 1,000 requests a second, up to 256). It reports the CPU time
// a charge (cpu-µs/charge) and the time a call takes (µs/batch): the
// meter's transaction runs on the same cores as the requests.
//
// Run: go test -run '^$' -bench BenchmarkDB_RecordInference ./internal/sqlstore
func BenchmarkDB_RecordInference(b *testing.B) {
	for _, batch := range []int{1, 12, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ctx := context.Background()
			db := mustOpen(b, filepath.Join(b.TempDir(), "bench.db"))
			r := mustAccount(b, db, idlegrid.RoleRenter)
			p := mustAccount(b, db, idlegrid.RoleProvider)
			mustTopUp(b, db, r.ID, 1_000_000_000*idlegrid.MicrosPerUnit)
			start := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
			cs := make([]idlegrid.InferenceCharge, b.N)
			for i := range cs {
				cs[i] = chargeOf(r.ID, p.ID, fmt.Sprintf("req_%08d", i), "", 1500, start.Add(time.Duration(i)*time.Millisecond))
			}
			cpu0, _ := cputime.Process()
			b.ResetTimer()
			calls := 0
			for len(cs) > 0 {
				n := min(batch, len(cs))
				for i, err := range db.RecordInference(ctx, cs[:n]) {
					if err != nil {
						b.Fatalf("charge %d: %v", i, err)
					}
				}
				cs, calls = cs[n:], calls+1
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(calls), "µs/batch")
			if cpu1, ok := cputime.Process(); ok {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/charge")
			}
		})
	}
}
