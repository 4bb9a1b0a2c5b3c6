package server_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// BenchmarkReap measures the reaper's passes (Server.Reap) over
// BenchmarkServerPlace's market of benchNodes online nodes, a fifth of
// them offered in a daily window and the rest always, with reapLeases
// jobs placed (assigned, never started, within StartTimeout), one
// heartbeat interval (10 s) of the coordinator's clock apart. Before the
// timer starts, reapWarmup passes run, so that every node has been looked
// at and its standing saved; each timed pass is the steady state of a
// market where nothing else happens. It reports ms/pass.
//
//	go test -run '^$' -bench BenchmarkReap -benchtime 100x ./internal/server
func BenchmarkReap(b *testing.B) { benchmarkReap(b, nil) }

// BenchmarkReapLevelled is BenchmarkReap under a trust policy whose
// levels need nothing, so that every node holds level 3: a look at a
// node above level 0 reads its provider's offence hold (once a pass for
// the provider), where a newcomer's never does.
//
//	go test -run '^$' -bench BenchmarkReapLevelled -benchtime 100x ./internal/server
func BenchmarkReapLevelled(b *testing.B) { benchmarkReap(b, levelsForAll) }

// levelsForAll is the default policy with levels that need nothing.
var levelsForAll = mustPolicy(`version: 2
levels:
  rules:
    - {level: 1, name: established, min_score: 0, min_gpu_hours: 0, verified_hardware: false}
    - {level: 2, name: trusted,     min_score: 0, min_gpu_hours: 0, verified_hardware: false}
    - {level: 3, name: elite,       min_score: 0, min_gpu_hours: 0, verified_hardware: false}
`)

func benchmarkReap(b *testing.B, policy *trustpolicy.Policy) {
	srv, clock := mustLeasedMarket(b, policy)
	ctx := context.Background()
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

// BenchmarkBuildEngine measures building the scheduler's engine from the
// store (what the first pass, a rebuild and each 5-minute resync do) over
// BenchmarkReap's market. It reports ms/build.
//
//	go test -run '^$' -bench BenchmarkBuildEngine -benchtime 10x ./internal/server
func BenchmarkBuildEngine(b *testing.B) {
	srv, _ := mustLeasedMarket(b, nil)
	ctx := context.Background()
	for b.Loop() {
		if err := srv.BuildEngine(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/build")
}

// mustLeasedMarket opens a server over BenchmarkServerPlace's market with
// reapLeases jobs placed, on a clock the benchmark moves, under policy
// (nil: the default trust policy).
func mustLeasedMarket(b *testing.B, policy *trustpolicy.Policy) (*server.Server, *stepClock) {
	path := filepath.Join(b.TempDir(), "market.db")
	seed := mustSeed(b, path, benchNodes)
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	clock := &stepClock{}
	clock.set(idlegrid.SystemClock{}.Now())
	counted := &placementCounter{Store: store, want: reapLeases, done: make(chan struct{}),
		listing: make(chan struct{}), gate: make(chan struct{})}
	srv, err := server.Open(server.Config{Store: counted, Clock: clock, TrustPolicy: policy,
		// No node misses a heartbeat in the hours the passes cover, and
		// the reaper's pass runs only when called.
		HeartbeatInterval: 1000 * time.Hour, StartTimeout: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	<-counted.listing
	r := rand.New(rand.NewPCG(reapLeases, 3))
	specs := make([]idlegrid.JobSpec, reapLeases)
	for i := range specs {
		specs[i] = benchJob(r)
	}
	mustQueue(b, store, seed.renter, specs)
	close(counted.gate)
	mustAllPlaced(b, counted, store)
	return srv, clock
}

const (
	reapEvery  = 10 * time.Second // the default heartbeat interval
	reapWarmup = 120              // 20 minutes of passes
	reapLeases = 5000             // jobs placed, one lease each
)

// stepClock is a clock the benchmark moves.
type stepClock struct{ t atomic.Int64 }

func (c *stepClock) Now() time.Time      { return time.UnixMicro(c.t.Load()).UTC() }
func (c *stepClock) set(t time.Time)     { c.t.Store(t.UnixMicro()) }
func (c *stepClock) add(d time.Duration) { c.t.Add(d.Microseconds()) }
