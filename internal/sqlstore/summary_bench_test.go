package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// BenchmarkSummary measures the market's summary (GET /v1/summary,
// idlegrid status, the operator's dashboard) on SQLite after a history of
// n charges, each its own posting of three entries (metered inference
// requests recorded one by one): Summary, which reads what providers
// earned and the fees from a row per account, beside the baseline that
// sums them from every entry of the ledger, as Summary did before.
//
// Run: go test -run '^$' -bench BenchmarkSummary -benchtime 20x ./internal/sqlstore
func BenchmarkSummary(b *testing.B) {
	for _, n := range []int{1_000, 20_000} {
		ctx := context.Background()
		db := mustOpen(b, filepath.Join(b.TempDir(), "bench.db"))
		r := mustAccount(b, db, idlegrid.RoleRenter)
		providers := []*idlegrid.Account{mustAccount(b, db, idlegrid.RoleProvider), mustAccount(b, db, idlegrid.RoleProvider)}
		mustTopUp(b, db, r.ID, 1_000_000*idlegrid.MicrosPerUnit)
		start := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
		for i := range n {
			c := chargeOf(r.ID, providers[i%2].ID, fmt.Sprintf("req_%08d", i), "", 1500, start.Add(time.Duration(i)*time.Millisecond))
			for _, err := range db.RecordInference(ctx, []idlegrid.InferenceCharge{c}) {
				mustOK(b, err)
			}
		}
		s, err := db.Summary(ctx)
		mustOK(b, err)
		earned, fees, err := sqlstore.LedgerScanTotals(ctx, db)
		mustOK(b, err)
		if int64(s.EarnedMicros) != earned || int64(s.FeesMicros) != fees {
			b.Fatalf("Summary earned %d fees %d; the ledger's entries say %d and %d", s.EarnedMicros, s.FeesMicros, earned, fees)
		}
		b.Run(fmt.Sprintf("charges=%d/summary", n), func(b *testing.B) {
			for b.Loop() {
				_, err := db.Summary(ctx)
				mustOK(b, err)
			}
		})
		b.Run(fmt.Sprintf("charges=%d/ledger-scan", n), func(b *testing.B) {
			for b.Loop() {
				_, _, err := sqlstore.LedgerScanTotals(ctx, db)
				mustOK(b, err)
			}
		})
	}
}
