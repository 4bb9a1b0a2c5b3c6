package sim

import (
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trace"
)

// Metrics is what one run measured. GPU-seconds and money are exact
// integers; shares and percentiles are derived in Summary.
type Metrics struct {
	Name, Title string

	OfferedGPUSeconds int64 // in the nodes' windows, within the span
	LeasedGPUSeconds  int64 // held by leases, whatever became of them
	PaidGPUSeconds    int64 // charged to renters
	UsefulGPUSeconds  int64 // work that counted: not lost to a stop or a failure

	RenterCost       idlegrid.Micros // every charge
	OnDemandCost     idlegrid.Micros // the useful work at cloud on-demand prices of the same models
	ProviderEarnings idlegrid.Micros // charges less the platform's fee
	Fees             idlegrid.Micros

	JobsArrived, JobsStarted, JobsCompleted int
	Placements                              int // placements made, requeued jobs' included

	Preemptions             int   // bronze leases stopped for gold or silver work
	PreemptedLostGPUSeconds int64 // work they lost since their last checkpoint
	WindowStops             int   // bronze leases stopped because their window ended
	WindowLostGPUSeconds    int64
	Failures                int // leases the node failed
	FailedLostGPUSeconds    int64

	// NeverPlaced counts jobs whose renter gave up before any placement,
	// by the last reason the market gave; GaveUpAfterRequeue those that
	// ran, were requeued, and gave up.
	NeverPlaced        map[string]int
	NeverPlacedByTier  [3]int // gold, silver, bronze
	GaveUpAfterRequeue int
	// WaitingAtEnd counts jobs still queued when the span ended, by
	// reason; RunningAtEnd the leases still running (settled at the end).
	WaitingAtEnd map[string]int
	RunningAtEnd int

	// Waits is, per tier (gold, silver, bronze), the seconds each started
	// job waited from its arrival to its first start.
	Waits [3][]int32

	// PlaceCalls is how often the matcher was asked; placeNanos how long
	// each answer took, with the bookkeeping of what it decided.
	PlaceCalls int
	placeNanos []uint32
	// Skipped counts the jobs a pass did not ask about because a job
	// needing no more had just failed (see replay.dominated).
	Skipped int

	Wall          time.Duration
	PeakHeapBytes uint64

	// Time series, one value per sample bin.
	UsedSeries  []int64    // GPU-seconds leased
	QueueSeries [3][]int32 // jobs queued per tier at the end of the bin
	// PriceSeries is the median clearing price per model (0: none) in bins
	// of PriceBinSeconds, a whole number of sample bins, at most 120 of them.
	PriceSeries     map[string][]idlegrid.Micros
	PriceBinSeconds int64

	// Estimates holds the estimated starts (idlegrid job explain) of jobs
	// when they first waited against their actual starts; matchers that
	// cannot estimate leave it empty.
	Estimates EstimateStats

	Probes  [3]ProbeStats // the estimator's probe jobs, per tier
	Watched WatchedStats  // the estimator's own nodes

	Summary Summary
}

// OnTimeSlack is how late, in seconds, a start may be and still count as
// on time against its estimate: a placement pass and a little rounding.
const OnTimeSlack = 300

// NearSlack is how far, in seconds, a start may be from its estimate,
// earlier or later, and still count as near it. OnTime counts a start
// that comes early as on time, however early, so an estimate that is
// always late would score well; the share near and the mean error judge
// it both ways.
const NearSlack = 900

// EstimateStats compares the start the market estimated for each job when
// it first waited with the start the job got.
type EstimateStats struct {
	Asked   int // jobs that waited, asked once each
	Unknown int // of those, the ones the market gave no estimate
	// Late holds per tier (gold, silver, bronze), for each job with an
	// estimate that later started, its actual start less its estimate in
	// seconds: above 0 it started late.
	Late [3][]int32
	// UnknownStarted counts the jobs without an estimate that started.
	UnknownStarted int
}

// ProbeStats is what became of the estimator's probe jobs of one tier:
// each one sent Started, or GaveUp without starting, or was still Waiting
// for its first start when the replay ended.
type ProbeStats struct {
	Sent, Started, Completed, GaveUp, Waiting int
	Waits                                     []int32           // seconds to first start
	Prices                                    []idlegrid.Micros // the first lease's price per GPU-hour
	Costs                                     []idlegrid.Micros // every charge of each completed probe
}

// WatchedStats is what the estimator's own nodes offered and earned.
type WatchedStats struct {
	OfferedGPUSeconds, LeasedGPUSeconds int64
	Earned                              idlegrid.Micros
}

// Summary is the derived numbers of a run.
type Summary struct {
	FillRate, PaidFillRate float64
	SavingsPercent         float64
	// EarningsPerOfferedGPUHour is providers' earnings per GPU-hour they
	// offered, in micros.
	EarningsPerOfferedGPUHour idlegrid.Micros
	WaitP50, WaitP95, WaitP99 [3]int32 // seconds, per tier
	Started                   [3]int
	NeverPlaced               int
	// LateP10, LateP50 and LateP90 are percentiles of how much later than
	// estimated jobs started (negative: earlier); OnTime is the share that
	// started no more than OnTimeSlack after their estimate, of all tiers
	// and per tier.
	LateP10, LateP50, LateP90 int32
	OnTime                    float64
	OnTimeByTier              [3]float64
	// Near is the share of estimated jobs that started within NearSlack
	// of their estimate, either way, of all tiers and per tier;
	// MeanErrorByTier is how far from it they started, on average, in
	// seconds.
	Near            float64
	NearByTier      [3]float64
	MeanErrorByTier [3]int32
	PlaceMeanNanos  int64
	PlaceP50Nanos   uint32
	PlaceP99Nanos   uint32
}

func newMetrics(w *world, m matcher) *Metrics {
	name := runName(m)
	met := &Metrics{
		Name: name, Title: RunTitles[name], OfferedGPUSeconds: w.offered,
		NeverPlaced: map[string]int{}, WaitingAtEnd: map[string]int{},
		PriceSeries: map[string][]idlegrid.Micros{},
		placeNanos:  make([]uint32, 0, len(w.jobs)+len(w.jobs)/4),
	}
	for t := range met.QueueSeries {
		met.QueueSeries[t] = make([]int32, len(w.offeredBins))
	}
	met.PriceBinSeconds = w.binSeconds * int64(max(1, (len(w.offeredBins)+119)/120))
	for _, n := range w.nodes {
		if n.watched {
			for _, s := range n.windows {
				met.Watched.OfferedGPUSeconds += (min(s.end, w.end) - s.start) * int64(n.gpus)
			}
		}
	}
	return met
}

func runName(m matcher) string {
	switch b := m.(type) {
	case *engineMatcher:
		return RunEngine
	case *baseline:
		return b.order.name()
	}
	return ""
}

func (m *Metrics) arrived(j *liveJob) {
	m.JobsArrived++
	if j.spec.probe {
		m.Probes[j.spec.tier].Sent++
	}
}

// Started counts the jobs with an estimate that started.
func (e *EstimateStats) Started() int {
	return len(e.Late[0]) + len(e.Late[1]) + len(e.Late[2])
}

func (m *Metrics) askedEstimate(j *liveJob) {
	m.Estimates.Asked++
	if j.estimate == 0 {
		m.Estimates.Unknown++
	}
}

func (m *Metrics) started(j *liveJob, t int64, price idlegrid.Micros) {
	m.JobsStarted++
	switch {
	case j.asked && j.estimate != 0:
		late := &m.Estimates.Late[j.spec.tier]
		*late = append(*late, int32(max(min(t-j.estimate, 1<<31-1), -1<<31)))
	case j.asked:
		m.Estimates.UnknownStarted++
	}
	wait := int32(min(t-j.arrived, 1<<31-1))
	m.Waits[j.spec.tier] = append(m.Waits[j.spec.tier], wait)
	if j.spec.probe {
		p := &m.Probes[j.spec.tier]
		p.Started++
		p.Waits = append(p.Waits, wait)
		p.Prices = append(p.Prices, price)
	}
}

func (m *Metrics) completed(j *liveJob, t int64) {
	m.JobsCompleted++
	if j.spec.probe {
		p := &m.Probes[j.spec.tier]
		p.Completed++
		p.Costs = append(p.Costs, j.charged)
	}
}

// priced records a placement's clearing price for the plots.
func (m *Metrics) priced(r *replay, l *lease) {
	m.Placements++
	model := l.node.n.model
	r.binPrice[model] = append(r.binPrice[model], l.price)
}

func (m *Metrics) settled(r *replay, l *lease, how int, gpuSecs, useful int64, charge, fee idlegrid.Micros) {
	m.LeasedGPUSeconds += gpuSecs
	if charge > 0 {
		m.PaidGPUSeconds += gpuSecs
	}
	m.UsefulGPUSeconds += useful
	m.RenterCost += charge
	m.Fees += fee
	m.ProviderEarnings += charge - fee
	m.OnDemandCost += idlegrid.CostOf(r.w.onDemand[l.node.n.model], useful)
	lost := gpuSecs - useful
	switch {
	case how == endFailed:
		m.Failures++
		m.FailedLostGPUSeconds += lost
	case how == endStopped && l.windowEnd:
		m.WindowStops++
		m.WindowLostGPUSeconds += lost
	case how == endStopped:
		m.Preemptions++
		m.PreemptedLostGPUSeconds += lost
	}
	if l.node.n.watched {
		m.Watched.LeasedGPUSeconds += gpuSecs
		m.Watched.Earned += charge - fee
	}
}

func (m *Metrics) gaveUp(j *liveJob) {
	if j.spec.probe && !j.started {
		m.Probes[j.spec.tier].GaveUp++
	}
	if j.started {
		m.GaveUpAfterRequeue++
		return
	}
	m.NeverPlaced[ReasonCategory(j.reason)]++
	m.NeverPlacedByTier[j.spec.tier]++
}

func (m *Metrics) waitingAtEnd(j *liveJob) {
	if j.spec.probe && !j.started {
		m.Probes[j.spec.tier].Waiting++
	}
	m.WaitingAtEnd[ReasonCategory(j.reason)]++
}

func (m *Metrics) placeTime(d time.Duration, placed bool) {
	m.PlaceCalls++
	m.placeNanos = append(m.placeNanos, uint32(min(d.Nanoseconds(), 1<<32-1)))
}

// finish derives the summary.
func (m *Metrics) finish(r *replay) {
	m.UsedSeries = r.used
	s := &m.Summary
	if m.OfferedGPUSeconds > 0 {
		s.FillRate = float64(m.LeasedGPUSeconds) / float64(m.OfferedGPUSeconds)
		s.PaidFillRate = float64(m.PaidGPUSeconds) / float64(m.OfferedGPUSeconds)
		s.EarningsPerOfferedGPUHour = idlegrid.Micros(int64(m.ProviderEarnings) * 3600 / m.OfferedGPUSeconds)
	}
	if m.OnDemandCost > 0 {
		s.SavingsPercent = 100 * (1 - float64(m.RenterCost)/float64(m.OnDemandCost))
	}
	for t := range m.Waits {
		ws := sortedCopy(m.Waits[t])
		s.WaitP50[t], s.WaitP95[t], s.WaitP99[t] = percentile(ws, 50), percentile(ws, 95), percentile(ws, 99)
		s.Started[t] = len(ws)
	}
	for _, n := range m.NeverPlaced {
		s.NeverPlaced += n
	}
	if late := sortedCopy(slices.Concat(m.Estimates.Late[:]...)); len(late) > 0 {
		s.LateP10, s.LateP50, s.LateP90 = percentile(late, 10), percentile(late, 50), percentile(late, 90)
		s.OnTime, s.Near = onTime(late), near(late)
		for t, l := range m.Estimates.Late {
			s.OnTimeByTier[t], s.NearByTier[t], s.MeanErrorByTier[t] = onTime(sortedCopy(l)), near(l), meanError(l)
		}
	}
	if len(m.placeNanos) > 0 {
		var total int64
		for _, d := range m.placeNanos {
			total += int64(d)
		}
		s.PlaceMeanNanos = total / int64(len(m.placeNanos))
		ns := sortedCopy(m.placeNanos)
		s.PlaceP50Nanos, s.PlaceP99Nanos = percentile(ns, 50), percentile(ns, 99)
	}
	m.placeNanos = nil
}

// near is the share of lateness within NearSlack either way; 0 when there
// is none.
func near(late []int32) float64 {
	if len(late) == 0 {
		return 0
	}
	n := 0
	for _, l := range late {
		if -NearSlack <= l && l <= NearSlack {
			n++
		}
	}
	return float64(n) / float64(len(late))
}

// meanError is the mean of lateness either way, in seconds; 0 when there
// is none.
func meanError(late []int32) int32 {
	if len(late) == 0 {
		return 0
	}
	var sum int64
	for _, l := range late {
		sum += abs(int64(l))
	}
	return int32(sum / int64(len(late)))
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// onTime is the share of sorted lateness no more than OnTimeSlack; 0 when
// there is none.
func onTime(late []int32) float64 {
	if len(late) == 0 {
		return 0
	}
	n, _ := slices.BinarySearch(late, OnTimeSlack+1)
	return float64(n) / float64(len(late))
}

// ReasonCategory folds the market's reason for a wait into a few kinds,
// for counting: "no node fits: 3 cap below ask, 2 window too short" is
// "no node fits: cap below ask", and so is "no node fits: 3 cap below
// ask; the cheapest that matches asks …".
func ReasonCategory(reason string) string {
	switch {
	case reason == "":
		return "never tried"
	case strings.HasPrefix(reason, "no node fits: "):
		counts, _, _ := strings.Cut(strings.TrimPrefix(reason, "no node fits: "), ";")
		first, _, _ := strings.Cut(counts, ",")
		if _, r, ok := strings.Cut(first, " "); ok {
			return "no node fits: " + r
		}
		return "no node fits"
	case strings.HasPrefix(reason, "no room now"):
		return "no room: no matching node free, open long enough and within the cap"
	case strings.HasPrefix(reason, "preempting"), strings.HasPrefix(reason, "waiting for the bronze leases"):
		return "waiting for preempted bronze leases to stop"
	case strings.HasPrefix(reason, "waiting for its reservation"), strings.HasPrefix(reason, "no node can take it now; reserved"):
		return "holding a reservation that had not started"
	case strings.HasPrefix(reason, "no nodes online"):
		return "no nodes online"
	}
	return reason
}

func medianMicros(ps []idlegrid.Micros) idlegrid.Micros {
	return trace.MedianMicros(slices.Clone(ps))
}
