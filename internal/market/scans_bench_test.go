package market_test

import "testing"

// BenchmarkScans measures the reads of every node that people ask for, on
// BenchmarkPlace's 100,000-node market, 80% busy: the market view and a
// job's explanation (the benchmark's jobs in turn). Each runs on the
// scheduler's goroutine and holds placements back while it runs, which is
// why the server shares them a budget of its time (server.Config.ScanShare).
//
//	go test -run '^$' -bench Scans -benchtime 20x ./internal/market
func BenchmarkScans(b *testing.B) {
	m := newPlaceMarket(100_000)
	e, _, _ := loadedEngine(m)
	e.Advance(now)
	b.Run("market-view", func(b *testing.B) {
		for b.Loop() {
			e.MarketView(now)
		}
	})
	b.Run("explain", func(b *testing.B) {
		i := 0
		for b.Loop() {
			e.Explain(m.jobs[i%len(m.jobs)], now)
			i++
		}
	})
}
