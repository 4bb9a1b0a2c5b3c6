// Package sim replays demand and supply traces through idlegrid's market
// on a virtual clock, and through simple baselines beside it, and measures
// what each does for renters and providers.
//
// A replay is a discrete-event simulation: an event heap of job arrivals,
// lease ends, failures and stops, reliability updates and samples, plus
// the engine's own NextEvent (windows opening and closing, notices falling
// due). At each moment something happens, the replay runs a placement
// pass the way the coordinator does (internal/server): Advance, then the
// queued jobs highest tier first. The engine it drives is
// internal/market.Engine itself, the code the server runs, never a copy.
// The baselines (baseline.go) are deliberately simple matchers over the
// same nodes, jobs and failures: FIFO first-fit, cheapest-first without
// reliability weighting, and pay-as-bid (market.FirstMatcher's rule).
//
// Nodes fail leases by a true reliability drawn per node; the market sees
// only each node's record (idlegrid.ReliabilityOf), updated as leases end.
// A lease's failure is drawn from the job, its attempt and the node, so
// every run sees the same failure for the same placement. docs/traces.md
// states every mapping and modelling choice.
//
// Run owns no goroutines beyond those it waits for; it stops when its
// context is cancelled.
package sim

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
	"github.com/idlegrid/idlegrid/internal/trace"
)

// Config is one simulation. Demand, Supply and Prices are required; zero
// fields take the defaults.
type Config struct {
	Demand *trace.Demand
	Supply *trace.Supply
	Prices *trace.Prices
	// ModelMix is the GPUs per model to draw from for nodes whose trace
	// names no model (Helios); nil means DefaultModel for all.
	ModelMix map[string]int

	// Nodes and Jobs resample the traces to that many (0: as they are).
	Nodes, Jobs int
	Seed        uint64
	// Span cuts the replay to this long from the start of the supply.
	Span  time.Duration
	Align Align

	// Patience is how long a job waits in the queue before its renter
	// gives up. Default 24 hours.
	Patience time.Duration
	// CheckpointEvery is how often jobs save their work, unless a job says
	// (trace.Job.CheckpointEverySeconds); a preempted or failed lease loses
	// what ran since. 0: jobs never checkpoint.
	CheckpointEvery time.Duration
	// FeeBasisPoints is the platform's share of every charge, as the
	// server's --fee-bps. Default 1000 (10%); negative means none.
	FeeBasisPoints int64
	// Market configures the engine, as the server's market settings.
	Market market.Config
	// Reliability, when above zero, is every node's true share of
	// completed leases, instead of a draw; 1 means nodes never fail.
	Reliability float64

	// Runs names the matchers to run, in order: RunEngine and the
	// baselines. nil means DefaultRuns.
	Runs []string
	// Parallel is how many runs go at once. Default 1, so that their
	// timings do not disturb each other.
	Parallel int

	// SampleEvery is the width of a plot's time bins. Default: the span
	// in 600 bins, at least a minute.
	SampleEvery time.Duration
	// RetryEvery is how often queued jobs are tried again when nothing
	// has changed (young bronze leases become preemptible as time passes).
	// Default 1 minute.
	RetryEvery time.Duration
	// RecordEvery is how often nodes' changed records reach the market.
	// Default 1 hour.
	RecordEvery time.Duration

	// Probes and ExtraNodes are what the estimator adds to a replay.
	Probes     []Probe
	ExtraNodes []ExtraNode

	// Progress, when set, is called now and then from the running
	// replays (from several goroutines when Parallel > 1).
	Progress func(Progress)
}

// Align says how demand times are moved onto the supply's span.
type Align int

const (
	// AlignAuto moves the demand (as AlignMedian) only when one trace
	// counts time from its own start and the other is on the calendar.
	AlignAuto Align = iota
	// AlignMedian moves the demand's median submit time to the middle of
	// the supply's span.
	AlignMedian
	// AlignNone replays the demand at its own times.
	AlignNone
)

// Defaults of Config.
const (
	DefaultPatience       = 24 * time.Hour
	DefaultRetryEvery     = time.Minute
	DefaultRecordEvery    = time.Hour
	DefaultFeeBasisPoints = 1000
)

// Run names.
const (
	RunEngine   = "engine"
	RunFIFO     = "fifo"
	RunCheapest = "cheapest"
	RunPayAsBid = "pay-as-bid"
)

// DefaultRuns is the engine and every baseline.
var DefaultRuns = []string{RunEngine, RunFIFO, RunCheapest, RunPayAsBid}

// RunTitles says what each run is, for reports.
var RunTitles = map[string]string{
	RunEngine:   "idlegrid engine (second-score auction, tiers, preemption, backfill)",
	RunFIFO:     "baseline: FIFO first-fit, pays the ask",
	RunCheapest: "baseline: cheapest-first, no reliability weighting, pays the ask",
	RunPayAsBid: "baseline: pay-as-bid, cheapest reliable (FirstMatcher's rule)",
}

func (c Config) withDefaults() Config {
	if c.Patience <= 0 {
		c.Patience = DefaultPatience
	}
	if c.RetryEvery <= 0 {
		c.RetryEvery = DefaultRetryEvery
	}
	if c.RecordEvery <= 0 {
		c.RecordEvery = DefaultRecordEvery
	}
	if c.FeeBasisPoints == 0 {
		c.FeeBasisPoints = DefaultFeeBasisPoints
	} else if c.FeeBasisPoints < 0 {
		c.FeeBasisPoints = 0
	}
	if c.Runs == nil {
		c.Runs = DefaultRuns
	}
	if c.Parallel <= 0 {
		c.Parallel = 1
	}
	return c
}

// Probe is a job the estimator sends into the market again and again, to
// learn what it would pay and how long it would wait.
type Probe struct {
	Job   trace.Job // Submit is ignored
	Every time.Duration
}

// ExtraNode is a node the estimator adds to the supply, whose takings it
// watches. It is offered in Node.Windows, or when it has none in the
// windows of Schedule within the replay span.
type ExtraNode struct {
	Node     trace.Node
	Schedule idlegrid.Schedule
	Ask      idlegrid.Micros // silver floor; 0: the market price of its model
	// Reliability is its true share of completed leases; its record
	// starts empty, so the market sees a newcomer's 0.9.
	Reliability float64
}

// Progress is how far one run is.
type Progress struct {
	Run        string
	Index, Of  int     // this run's place among the runs
	Done       float64 // share of the span replayed, 0..1
	Virtual    time.Time
	Jobs       int // jobs arrived so far
	Placements int
	Queued     int
	Wall       time.Duration
}

// Run builds the world from cfg's traces and replays it through each run.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := checkRuns(cfg.Runs); err != nil {
		return nil, err
	}
	began := time.Now()
	w, err := buildWorld(cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{World: w.summary(), Runs: make([]*Metrics, len(cfg.Runs))}
	res.World.BuildWall = time.Since(began)
	sem := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	errs := make([]error, len(cfg.Runs))
	for i, name := range cfg.Runs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := newReplay(w, newMatcher(name, w), i, len(cfg.Runs))
			res.Runs[i], errs[i] = r.run(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	res.Wall = time.Since(began)
	res.PeakRSSBytes = peakRSS()
	return res, nil
}

// checkRuns refuses an unknown run, and a run named twice: each run's
// metrics go under its name.
func checkRuns(runs []string) error {
	seen := map[string]bool{}
	for _, name := range runs {
		if _, ok := RunTitles[name]; !ok {
			return idlegrid.Invalid("runs", "unknown run %q; use %s", name, fmt.Sprint(DefaultRuns))
		} else if seen[name] {
			return idlegrid.Invalid("runs", "%q is named twice; name each run once", name)
		}
		seen[name] = true
	}
	return nil
}

func newMatcher(name string, w *world) matcher {
	switch name {
	case RunEngine:
		return newEngineMatcher(w)
	case RunFIFO:
		return newBaseline(w, orderFIFO)
	case RunCheapest:
		return newBaseline(w, orderCheapest)
	}
	return newBaseline(w, orderPayAsBid)
}

// heapSampler tracks the peak of the Go heap while a run goes.
type heapSampler struct{ peak uint64 }

func (h *heapSampler) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.peak = max(h.peak, ms.HeapAlloc)
}

// percentile returns the p-th percentile (0..100) of sorted xs by the
// nearest-rank method, and 0 for none.
func percentile[T int32 | uint32 | int64](xs []T, p float64) T {
	if len(xs) == 0 {
		return 0
	}
	k := int(p/100*float64(len(xs))+0.999999) - 1
	return xs[min(max(k, 0), len(xs)-1)]
}

func sortedCopy[T int32 | uint32 | int64](xs []T) []T {
	ys := slices.Clone(xs)
	slices.Sort(ys)
	return ys
}
