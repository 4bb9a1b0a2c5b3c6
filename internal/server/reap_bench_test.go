package server_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// BenchmarkReap measures the reaper's passes (Server.Reap) over
// BenchmarkServerPlace's market of benchNodes online nodes, a fifth of
// them offered in a daily window and the rest always, one heartbeat
// interval (10 s) of the coordinator's clock apart. Before the timer
// starts, reapWarmup passes run, so that every node has been looked at and
// its standing saved; each timed pass is the steady state of a market
// where nothing else happens. It reports ms/pass.
//
//	go test -run '^$' -bench BenchmarkReap -benchtime 100x ./internal/server
func BenchmarkReap(b *testing.B) {
	path := filepath.Join(b.TempDir(), "market.db")
	mustSeed(b, path, benchNodes)
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	clock := &stepClock{}
	clock.set(idlegrid.SystemClock{}.Now())
	srv, err := server.Open(server.Config{Store: store, Clock: clock,
		// No node misses a heartbeat in the hours the passes cover, and
		// the pass runs only when called.
		HeartbeatInterval: 1000 * time.Hour, StartTimeout: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	pass := func() {
		clock.add(reapEvery)
		if err := srv.Reap(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for range reapWarmup {
		pass()
	}
	b.ResetTimer()
	for b.Loop() {
		pass()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/pass")
}

const (
	reapEvery  = 10 * time.Second // the default heartbeat interval
	reapWarmup = 120              // 20 minutes of passes
)

// stepClock is a clock the benchmark moves.
type stepClock struct{ t atomic.Int64 }

func (c *stepClock) Now() time.Time      { return time.UnixMicro(c.t.Load()).UTC() }
func (c *stepClock) set(t time.Time)     { c.t.Store(t.UnixMicro()) }
func (c *stepClock) add(d time.Duration) { c.t.Add(d.Microseconds()) }
