package server_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/cputime"
	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// BenchmarkServerPlace measures placements per second end to end through
// the coordinator, with every placement committed to the database.
//
// Each run starts from a market of benchNodes online nodes (mixed GPU
// models, regions, residencies, windows, asks and time-of-day prices) and a
// renter with money, put in through the store's own methods and not timed,
// and a running Server whose scheduler has loaded that market. Then b.N
// jobs of mixed tiers and constraints arrive, in one of three ways:
//
//	queued        they are in the store, queued (Store.CreateJob, not
//	              timed), when the timer starts and the scheduler's pass
//	              reads them
//	submitted     the timer starts, then benchSubmitters goroutines submit
//	              them through Server.SubmitJob, as the HTTP handlers
//	              would, and the time of their commits counts
//	submitted-64  the same from benchManySubmitters goroutines, as many
//	              renters' handlers at once
//	queued-lists  queued, while a renter asks the free GPUs of a page of
//	              1,000 nodes (Server.FreeGPUs, what every node list asks
//	              the scheduler) every 10 ms; it reports their latency,
//	              list-p50-ms, list-p99-ms and list-max-ms
//	queued-scans  queued, while a renter asks every 10 ms for the
//	              explanation of a queued job (another each time) and the
//	              market view, reads of every node that share the
//	              scheduler's scan budget; it reports their latency
//	              (scan-p50-ms, …) and the share refused (scan-refused-%)
//	queued-scans-unbounded  the same with no budget (ScanShare 1,000)
//
// The timer stops when the store has committed the last placement: every
// job is running, with its leases, GPU claims and escrow holds stored.
//
// Sub-benchmarks, MATCHER/MODE on each database:
//
//	sqlite/…       SQLite in WAL mode with synchronous=NORMAL (the default), on a temp file
//	sqlite-full/…  the same with synchronous=FULL
//	postgres/…   PostgreSQL at IDLEGRID_TEST_POSTGRES (skipped when unset)
//	…/engine/…   the market engine
//	…/naive/…    Config.NaiveMatcher: market.FirstMatcher, a full scan of every node per job
//
// Run (see BENCHMARKS.md):
//
//	go test -run '^$' -bench BenchmarkServerPlace -benchtime 10000x ./internal/server
func BenchmarkServerPlace(b *testing.B) {
	tmpl := filepath.Join(b.TempDir(), "market.db")
	seedOnce := sync.OnceValue(func() *benchSeed { return mustSeed(b, tmpl, benchNodes) })
	for _, db := range []struct{ name, query string }{
		{"sqlite", ""}, // synchronous=NORMAL, the default
		{"sqlite-full", "?_pragma=synchronous(FULL)"}, // the WAL synced at every commit
	} {
		for _, naive := range []bool{false, true} {
			for _, submitters := range benchModes {
				b.Run(db.name+"/"+benchName(naive, submitters), func(b *testing.B) {
					seed := seedOnce()
					path := filepath.Join(b.TempDir(), "market.db")
					mustCopy(b, tmpl, path)
					benchPlace(b, path+db.query, seed, naive, submitters)
				})
			}
		}
	}
	for _, naive := range []bool{false, true} {
		for _, submitters := range benchModes {
			b.Run("postgres/"+benchName(naive, submitters), func(b *testing.B) {
				dsn := pgtest.NewDSN(b)
				benchPlace(b, dsn, mustSeed(b, dsn, benchNodes), naive, submitters)
			})
		}
	}
}

const (
	benchNodes      = 10_000
	benchSubmitters = 4
	// benchManySubmitters is submitted-64's: many renters' handlers at once.
	benchManySubmitters = 64
	// benchMaxJobs is how many of benchJob's jobs the market surely holds
	// at once. They take about a third of its GPUs, but most go to the
	// cheapest models, which must not run out.
	benchMaxJobs = 10_000
)

// benchModes are the ways jobs arrive: queued (0; benchQueuedLists with
// node lists beside, benchQueuedScans with explains and market views), or
// submitted by so many goroutines.
var benchModes = []int{0, benchQueuedLists, benchQueuedScans, benchQueuedScansUnbounded, benchSubmitters, benchManySubmitters}

// The modes queued-lists, queued-scans and queued-scans-unbounded.
const (
	benchQueuedLists          = -1
	benchQueuedScans          = -2
	benchQueuedScansUnbounded = -3
)

func benchName(naive bool, submitters int) string {
	name := "engine/"
	if naive {
		name = "naive/"
	}
	switch submitters {
	case 0:
		return name + "queued"
	case benchQueuedLists:
		return name + "queued-lists"
	case benchQueuedScans:
		return name + "queued-scans"
	case benchQueuedScansUnbounded:
		return name + "queued-scans-unbounded"
	case benchSubmitters:
		return name + "submitted"
	}
	return fmt.Sprintf("%ssubmitted-%d", name, submitters)
}

// benchSeed is what mustSeed put in the store.
type benchSeed struct {
	renter *idlegrid.Account
}

func benchPlace(b *testing.B, dsn string, seed *benchSeed, naive bool, submitters int) {
	if b.N > benchMaxJobs {
		b.Fatalf("b.N = %d jobs would not all fit %d nodes; run with -benchtime %dx or fewer", b.N, benchNodes, benchMaxJobs)
	}
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	counted := &placementCounter{Store: store, want: int64(b.N), done: make(chan struct{}),
		listing: make(chan struct{}), gate: make(chan struct{})}
	cfg := server.Config{
		Store: counted, NaiveMatcher: naive,
		// The seeded nodes' heartbeats are old by now: nothing here should
		// reap them, nor the leases no agent starts.
		HeartbeatInterval: time.Hour, StartTimeout: time.Hour,
	}
	if submitters == benchQueuedScansUnbounded {
		cfg.ScanShare = 1000
	}
	srv, err := server.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	<-counted.listing // the scheduler has loaded the market and waits at its first read of the queue

	r := rand.New(rand.NewPCG(uint64(b.N), 2))
	specs := make([]idlegrid.JobSpec, b.N)
	for i := range specs {
		specs[i] = benchJob(r)
	}
	var cpu0 time.Duration
	stopLists := func() {}
	if submitters > 0 {
		close(counted.gate)
		cpu0, _ = cputime.Process()
		b.ResetTimer()
		mustSubmit(b, srv, as(seed.renter), specs, submitters)
	} else {
		ids := mustQueue(b, store, seed.renter, specs)
		switch submitters {
		case benchQueuedLists:
			stopLists = listNodesMeanwhile(b, srv, store, seed.renter)
		case benchQueuedScans, benchQueuedScansUnbounded:
			stopLists = scanMeanwhile(b, srv, seed.renter, ids)
		}
		cpu0, _ = cputime.Process()
		b.ResetTimer()
		close(counted.gate)
	}
	mustAllPlaced(b, counted, store)
	b.StopTimer()
	stopLists()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "placements/s")
	// The process's CPU time per placement (the store is in-process on
	// SQLite) varies far less than wall time on a shared machine.
	if cpu1, ok := cputime.Process(); ok {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/placement")
	}
	mustAllRunning(b, store, b.N)
}

// listNodesMeanwhile asks the free GPUs of a page of 1,000 nodes as the
// renter every 10 ms until the returned func is called, which reports the
// asks' latency.
func listNodesMeanwhile(b *testing.B, srv *server.Server, store idlegrid.Store, renter *idlegrid.Account) (stop func()) {
	page, err := store.ListNodes(context.Background(), idlegrid.NodeFilter{Limit: 1000})
	if err != nil {
		b.Fatal(err)
	}
	return meanwhile(b, "list", func(int) error {
		_, err := srv.FreeGPUs(as(renter), page)
		return err
	})
}

// scanMeanwhile asks as the renter, every 10 ms, for the explanation of
// one of the queued jobs (each in turn, so that none is answered from the
// last read) and for the market view, until the returned func is called,
// which reports their latency and the share refused over the scan budget.
func scanMeanwhile(b *testing.B, srv *server.Server, renter *idlegrid.Account, jobs []string) (stop func()) {
	asks, refused := 0, 0
	report := meanwhile(b, "scan", func(i int) error {
		for _, err := range []error{
			func() error { _, err := srv.Explain(as(renter), jobs[i%len(jobs)]); return err }(),
			func() error { _, err := srv.Market(as(renter)); return err }(),
		} {
			asks++
			if idlegrid.ErrorCode(err) == idlegrid.ETOOMANY {
				refused++
			} else if err != nil && idlegrid.ErrorCode(err) != idlegrid.ECONFLICT { // a job placed meanwhile has no wait to explain
				return err
			}
		}
		return nil
	})
	return func() {
		report()
		if asks > 0 {
			b.ReportMetric(100*float64(refused)/float64(asks), "scan-refused-%")
		}
	}
}

// meanwhile calls ask(i), i counting from 0, every 10 ms until the returned
// func is called, which reports its latency as name-p50-ms, name-p99-ms
// and name-max-ms.
func meanwhile(b *testing.B, name string, ask func(i int) error) (stop func()) {
	var lat []time.Duration
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			t0 := time.Now()
			if err := ask(i); err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(t0))
		}
	}()
	return func() {
		close(quit)
		<-done
		if len(lat) == 0 {
			return
		}
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(lat[len(lat)/2]), name+"-p50-ms")
		b.ReportMetric(ms(lat[len(lat)*99/100]), name+"-p99-ms")
		b.ReportMetric(ms(lat[len(lat)-1]), name+"-max-ms")
	}
}

// mustSubmit submits the jobs through the server from so many goroutines.
func mustSubmit(b *testing.B, srv *server.Server, renter context.Context, specs []idlegrid.JobSpec, submitters int) {
	var next atomic.Int64
	errs := make(chan error, submitters)
	for range submitters {
		go func() {
			for i := next.Add(1) - 1; i < int64(len(specs)); i = next.Add(1) - 1 {
				if _, err := srv.SubmitJob(renter, specs[i]); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range submitters {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// mustQueue puts the jobs in the store, queued, as SubmitJob would, and
// returns their IDs.
func mustQueue(b *testing.B, store idlegrid.Store, renter *idlegrid.Account, specs []idlegrid.JobSpec) []string {
	now := idlegrid.SystemClock{}.Now()
	ids := make([]string, len(specs))
	for i, spec := range specs {
		spec.Normalize()
		if err := spec.Validate(now); err != nil {
			b.Fatal(err)
		}
		j := &idlegrid.Job{ID: idlegrid.NewID("job"), RenterID: renter.ID, JobSpec: spec, State: idlegrid.JobQueued,
			Reason: idlegrid.MatcherPendingReason, CreatedAt: now.Add(time.Duration(i) * time.Microsecond)}
		if err := store.CreateJob(context.Background(), j); err != nil {
			b.Fatal(err)
		}
		ids[i] = j.ID
	}
	return ids
}

// placementCounter counts the placements the store committed, and closes
// done when it has seen want of them.
//
// It also holds the scheduler at its first read of the queue: it closes
// listing and waits for gate, so that the benchmark knows the market is
// loaded and can queue the jobs before the pass reads them.
type placementCounter struct {
	idlegrid.Store
	want   int64
	placed atomic.Int64
	done   chan struct{}

	listing, gate chan struct{}
	held          sync.Once
}

func (c *placementCounter) ListJobs(ctx context.Context, f idlegrid.JobFilter) ([]*idlegrid.Job, error) {
	c.held.Do(func() {
		close(c.listing)
		<-c.gate
	})
	return c.Store.ListJobs(ctx, f)
}

func (c *placementCounter) PlaceJob(ctx context.Context, p *idlegrid.Placement) error {
	err := c.Store.PlaceJob(ctx, p)
	if err == nil {
		c.count(1)
	}
	return err
}

func (c *placementCounter) PlaceJobs(ctx context.Context, ps []*idlegrid.Placement) []error {
	errs := c.Store.PlaceJobs(ctx, ps)
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	c.count(n)
	return errs
}

func (c *placementCounter) count(n int) {
	if n > 0 && c.placed.Add(int64(n)) == c.want {
		close(c.done)
	}
}

// mustAllPlaced waits until the store has committed every placement, and
// fails, saying why jobs wait, if placements stop coming for a minute.
func mustAllPlaced(tb testing.TB, c *placementCounter, store idlegrid.Store) {
	tb.Helper()
	for last := int64(-1); ; {
		stall := time.NewTimer(time.Minute)
		select {
		case <-c.done:
			stall.Stop()
			return
		case <-stall.C:
		}
		if n := c.placed.Load(); n != last {
			last = n
			continue
		}
		jobs, err := store.ListJobs(context.Background(), idlegrid.JobFilter{States: []idlegrid.JobState{idlegrid.JobQueued}, Limit: 20})
		if err != nil {
			tb.Fatal(err)
		}
		for _, j := range jobs {
			tb.Logf("queued: %s %+v: %s", j, j.JobSpec, j.Reason)
		}
		tb.Fatalf("placements stopped at %d of %d", last, c.want)
	}
}

// mustAllRunning checks what the benchmark timed: every job is running, every
// placement holds its money, and the ledger balances.
func mustAllRunning(tb testing.TB, store idlegrid.Store, jobs int) {
	tb.Helper()
	sum, err := store.Summary(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	if got := sum.JobsByState[idlegrid.JobRunning]; got != jobs {
		tb.Fatalf("%d jobs running, want %d (%v)", got, jobs, sum.JobsByState)
	} else if sum.HeldMicros <= 0 {
		tb.Fatalf("held %d, want the placements' holds", sum.HeldMicros)
	}
	if sum, err := store.LedgerSum(context.Background()); err != nil || sum != 0 {
		tb.Fatalf("ledger sums to %d (%v), want 0", sum, err)
	}
}

func mustCopy(tb testing.TB, from, to string) {
	tb.Helper()
	src, err := os.Open(from)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		tb.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		tb.Fatal(err)
	}
}

var (
	benchModels  = []string{"H100-80GB", "A100-80GB", "A100-40GB", "L40S", "RTX4090"}
	benchVRAM    = []int{81920, 81920, 40960, 49152, 24576}
	benchPrice   = []idlegrid.Micros{2_500_000, 1_800_000, 1_200_000, 900_000, 500_000}
	benchRegions = []string{"us-east", "us-west", "eu-west", "eu-north", "ap-south", "ap-east"}
	benchResid   = []string{"US", "US", "EU", "EU", "IN", "JP"}
	benchZones   = []string{"America/New_York", "America/Los_Angeles", "Europe/Paris", "Europe/Stockholm", "Asia/Kolkata", "Asia/Tokyo"}
)

// mustSeed puts a renter with money and n online nodes under one provider
// in the store at dsn, through the store's own methods.
func mustSeed(tb testing.TB, dsn string, n int) *benchSeed {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer store.Close()
	now := idlegrid.SystemClock{}.Now()
	seed := &benchSeed{renter: &idlegrid.Account{ID: idlegrid.NewID("acct"), Name: "renter", Role: idlegrid.RoleRenter, CreatedAt: now}}
	provider := &idlegrid.Account{ID: idlegrid.NewID("acct"), Name: "provider", Role: idlegrid.RoleProvider, CreatedAt: now}
	token := &idlegrid.JoinToken{ID: idlegrid.NewID("jt"), ProviderID: provider.ID, Name: "fleet", Prefix: "igj_",
		Hash: "bench-token", ExpiresAt: now.Add(24 * time.Hour), CreatedAt: now}
	mustDo(tb, store.CreateAccount(ctx, seed.renter))
	mustDo(tb, store.CreateAccount(ctx, provider))
	mustDo(tb, store.CreateJoinToken(ctx, token))
	_, err = store.PostTransfer(ctx, &idlegrid.Transfer{ID: idlegrid.NewID("tx"), IdempotencyKey: "bench-topup",
		Kind: idlegrid.TransferTopUp, CreatedAt: now, Entries: []idlegrid.Entry{
			{Account: idlegrid.WorldAccount, Amount: -1_000_000_000 * idlegrid.MicrosPerUnit},
			{Account: idlegrid.RenterAvailable(seed.renter.ID), Amount: 1_000_000_000 * idlegrid.MicrosPerUnit},
		}})
	mustDo(tb, err)
	r := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range n {
		node := &idlegrid.Node{ID: idlegrid.NewID("node"), PublicKey: fmt.Sprintf("bench-key-%d", i),
			Offer: benchOffer(r, fmt.Sprintf("node-%05d", i)), AgentVersion: "bench", CreatedAt: now}
		mustDo(tb, store.JoinNode(ctx, token.Hash, node))
		mustDo(tb, store.UpdateOffer(ctx, node.ID, node.Offer, "bench", now))
		mustDo(tb, store.SaveReputation(ctx, establishedNode(node, provider, now)))
	}
	return seed
}

// establishedNode is a record that lets a node run gold jobs: a score
// above market.DefaultGoldMinReliability at the default trust policy's
// gold level. A market of newcomers would place no gold job at all.
func establishedNode(n *idlegrid.Node, provider *idlegrid.Account, now time.Time) *idlegrid.ReputationUpdate {
	return &idlegrid.ReputationUpdate{Reputation: &idlegrid.Reputation{
		Subject: idlegrid.SubjectNode, SubjectID: n.ID, ProviderID: provider.ID,
		Score: 0.97, Level: 2, LevelName: "bench", CountsAt: now, UpdatedAt: now,
	}}
}

func mustDo(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// benchOffer is one node of the benchmark's market: 1 to 8 GPUs of one
// model in one region, always offered or in a daily window, asking about
// its model's going rate, some with a peak-hours multiplier.
func benchOffer(r *rand.Rand, name string) idlegrid.Offer {
	mi, ri := r.IntN(len(benchModels)), r.IntN(len(benchRegions))
	gpus := []int{1, 2, 4, 4, 8, 8}[r.IntN(6)]
	o := idlegrid.Offer{Name: name, CPUCores: 8 * gpus, RAMMB: 64000 * gpus, DiskGB: 1000,
		Region: benchRegions[ri], Residency: benchResid[ri],
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways, TimeZone: benchZones[ri]}}
	for g := range gpus {
		o.GPUs = append(o.GPUs, idlegrid.GPU{UUID: fmt.Sprintf("GPU-%s-%d", name, g), Model: benchModels[mi], VRAMMB: benchVRAM[mi]})
	}
	silver := benchPrice[mi] * idlegrid.Micros(70+r.IntN(60)) / 100
	o.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: silver, idlegrid.TierBronze: silver / 2}
	if r.IntN(10) > 0 {
		o.Ask.FloorMicrosPerGPUHour[idlegrid.TierGold] = silver * 13 / 10
	}
	if r.IntN(5) == 0 {
		o.Schedule.Mode = idlegrid.ScheduleWindows
		o.Schedule.Weekly = []idlegrid.WeeklyWindow{{Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}, Start: "18:00", End: "08:00"}}
	}
	if r.IntN(5) == 0 {
		o.Ask.TimeOfDay = []idlegrid.PriceWindow{{Start: "09:00", End: "18:00", MultiplierPercent: 130}}
	}
	return o
}

// benchJob is one job of the benchmark: 1 to 4 GPUs on one node, any tier,
// some asking for a model, a region (required or preferred) or residency,
// with a cap every node's ask is under so that every job places.
func benchJob(r *rand.Rand) idlegrid.JobSpec {
	s := idlegrid.JobSpec{
		Kind:  []idlegrid.WorkloadKind{idlegrid.KindTraining, idlegrid.KindFineTune, idlegrid.KindInference, idlegrid.KindEval}[r.IntN(4)],
		Image: "ghcr.io/acme/job:1", GPUs: []int{1, 1, 1, 1, 2, 2, 4}[r.IntN(7)],
		Tier:                     []idlegrid.Tier{idlegrid.TierGold, idlegrid.TierSilver, idlegrid.TierSilver, idlegrid.TierBronze}[r.IntN(4)],
		MaxPriceMicrosPerGPUHour: idlegrid.Micros(5+r.IntN(3)) * idlegrid.MicrosPerUnit,
		DurationSeconds:          int64(15+r.IntN(4*60)) * 60,
	}
	if r.IntN(2) == 0 { // two models, so that no model's supply runs out before the others'
		m := r.IntN(len(benchModels))
		s.GPUModels = []string{benchModels[m], benchModels[(m+1)%len(benchModels)]}
	}
	switch x := r.IntN(10); {
	case x < 2:
		s.Region = benchRegions[r.IntN(len(benchRegions))]
	case x < 4:
		s.Region, s.RegionPreferred = benchRegions[r.IntN(len(benchRegions))], true
	case x < 5:
		s.Residency = "EU"
	}
	return s
}
