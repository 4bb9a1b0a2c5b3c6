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
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range senders {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				id, at := ids[i%nodes], t0.Add(time.Duration(i/nodes)*10*time.Second)
				if _, err := db.Heartbeat(ctx, id, at); err != nil {
					b.Error(err)
					return
				}
				if err := db.NoteHeartbeat(ctx, id, at, 10*time.Second, 5*time.Second, at.Add(-7*24*time.Hour)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
}
