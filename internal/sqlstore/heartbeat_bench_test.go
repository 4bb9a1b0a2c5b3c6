package sqlstore_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// BenchmarkHeartbeats records heartbeats as the coordinator does for each
// one an agent sends (Heartbeat, then NoteHeartbeat), from 64 goroutines
// at once, on a market of 10,000 nodes: at the default interval (10 s) a
// market of N nodes sends N/10 a second. It reports heartbeats/s.
//
//	go test -run '^$' -bench BenchmarkHeartbeats -benchtime 20000x ./internal/sqlstore
func BenchmarkHeartbeats(b *testing.B) {
	const nodes, senders = 10_000, 64
	ctx := context.Background()
	db := mustOpen(b, filepath.Join(b.TempDir(), "idlegrid.db"))
	p := mustAccount(b, db, idlegrid.RoleProvider)
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = mustNode(b, db, p.ID, 1).ID
	}
	b.ResetTimer()
	concurrently(b, senders, func(i int64) error {
		id, at := ids[i%nodes], t0.Add(time.Duration(i/nodes)*10*time.Second)
		if _, err := db.Heartbeat(ctx, id, at); err != nil {
			return err
		}
		return db.NoteHeartbeat(ctx, id, at, 10*time.Second, 5*time.Second, at.Add(-7*24*time.Hour))
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
}

// concurrently calls write for 0 to b.N-1 from senders goroutines at once,
// each taking the next number as it is free, and returns once all are
// done; a sender whose write fails stops, failing the benchmark.
func concurrently(b *testing.B, senders int, write func(i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				if err := write(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
