package market_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// BenchmarkPlaceBreakdown runs BenchmarkPlace's loop at 100,000 nodes and
// logs where the latency is, by kind of placement: for each kind its
// share, mean, p50 and p99, its share of the loop's time and of the
// placements slower than the overall p99, its placements slower than
// issue 3's 50 µs as a share of all placements, and what the overall p99
// would be without it. It reports the overall p99-µs, and
// p99-without-gangs-µs.
//
//	go test -run '^$' -bench PlaceBreakdown -benchtime 150000x -v ./internal/market   # -v: the table is a log
func BenchmarkPlaceBreakdown(b *testing.B) {
	br := breakdown{}
	benchEngine(b, 100_000, benchOptions{observe: br.observe})
	br.report(b)
}

// targetP99 is issue 3's p99 at 100,000 nodes. The report's ">50 µs"
// column is each kind's placements slower than it, as a share of all
// placements: the target is met when the column sums to under 1%.
const targetP99 = 50 * time.Microsecond

// breakdown is the latencies of a run's placements by kind.
type breakdown map[string][]time.Duration

// observe files one placement under its kind: the first that applies, in
// this order.
func (br breakdown) observe(j *idlegrid.Job, d market.Decision, advanced bool, _ time.Time, took time.Duration) {
	kind := "other"
	switch {
	case advanced:
		kind = "ran the Advance"
	case j.Nodes > 1 && d.Placed():
		kind = "gang, placed"
	case j.Nodes > 1:
		kind = "gang, waits"
	case !d.Placed() && len(d.Preemptions) > 0:
		kind = "waits, preempting"
	case !d.Placed():
		kind = "waits, " + string(j.Tier)
	case d.Picks[0].ShadowRunnerUp:
		kind = "shadow runner-up"
	case len(j.Datasets) > 0:
		kind = "names datasets"
	case j.ReliabilityWeight != 0 && j.ReliabilityWeight != 1:
		kind = fmt.Sprintf("reliability weight %v", j.ReliabilityWeight)
	}
	br[kind] = append(br[kind], took)
}

func (br breakdown) report(b *testing.B) {
	var all []time.Duration
	for _, xs := range br {
		all = append(all, xs...)
	}
	if len(all) == 0 {
		return
	}
	p99 := quantile(all, 0.99)
	var total time.Duration
	for _, x := range all {
		total += x
	}
	var t strings.Builder
	fmt.Fprintf(&t, "%d placements, p99 %.1f µs\n", len(all), us(p99))
	fmt.Fprintf(&t, "%-22s %7s %6s %8s %8s %9s %6s %8s %8s %13s\n", "kind", "n", "share", "mean µs", "p50 µs", "p99 µs", "time", ">p99", ">50 µs", "p99 without")
	for _, kind := range slices.Sorted(maps.Keys(br)) {
		xs := br[kind]
		var sum time.Duration
		over, slow := 0, 0
		for _, x := range xs {
			sum += x
			if x > p99 {
				over++
			}
			if x > targetP99 {
				slow++
			}
		}
		fmt.Fprintf(&t, "%-22s %7d %5.1f%% %8.1f %8.1f %9.1f %5.1f%% %7.1f%% %7.2f%% %10.1f µs\n", kind, len(xs),
			100*float64(len(xs))/float64(len(all)), us(sum)/float64(len(xs)), us(quantile(xs, 0.5)), us(quantile(xs, 0.99)),
			100*float64(sum)/float64(total), 100*float64(over)/(float64(len(all))/100), 100*float64(slow)/float64(len(all)), us(br.p99Without(kind)))
	}
	b.Log("\n" + t.String())
	b.ReportMetric(us(br.p99Without("gang, placed", "gang, waits")), "p99-without-gangs-µs")
}

// p99Without is the p99 of the placements of every kind but those named.
func (br breakdown) p99Without(kinds ...string) time.Duration {
	var rest []time.Duration
	for k, xs := range br {
		if !slices.Contains(kinds, k) {
			rest = append(rest, xs...)
		}
	}
	if len(rest) == 0 {
		return 0
	}
	return quantile(rest, 0.99)
}

// quantile sorts xs and returns its q-quantile.
func quantile(xs []time.Duration, q float64) time.Duration {
	slices.Sort(xs)
	return xs[min(int(q*float64(len(xs))), len(xs)-1)]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// BenchmarkPlaceHours runs BenchmarkPlace's loop at 100,000 nodes and
// logs each simulated hour's mean and p99 (UTC; the loop starts on a
// Monday at 12:00 and moves 10 s every 1,000 placements). The market
// changes over the day: windows open and close in six time zones and
// time-of-day prices move, and searches cost most when many open nodes
// are near the end of their windows. A 3-s BenchmarkPlace covers about
// the first 40 minutes; 1,500,000 placements cover four hours, 8,640,000
// a day. It reports the overall placements/s and p99-µs, and the worst
// hour's mean and p99.
//
//	go test -run '^$' -bench PlaceHours -benchtime 1500000x -v ./internal/market   # -v: the table is a log
func BenchmarkPlaceHours(b *testing.B) {
	var hours [][]time.Duration
	benchEngine(b, 100_000, benchOptions{observe: func(_ *idlegrid.Job, _ market.Decision, _ bool, at time.Time, took time.Duration) {
		h := int(at.Sub(now) / time.Hour)
		for len(hours) <= h {
			hours = append(hours, nil)
		}
		hours[h] = append(hours[h], took)
	}})
	var t strings.Builder
	fmt.Fprintf(&t, "%-11s %9s %8s %8s %8s\n", "hour (UTC)", "n", "mean µs", "p99 µs", ">50 µs")
	worstMean, worstP99 := 0.0, 0.0
	for h, xs := range hours {
		var sum time.Duration
		slow := 0
		for _, x := range xs {
			sum += x
			if x > targetP99 {
				slow++
			}
		}
		mean, p99 := us(sum)/float64(len(xs)), us(quantile(xs, 0.99))
		start := now.Add(time.Duration(h) * time.Hour)
		fmt.Fprintf(&t, "%s–%s %9d %8.1f %8.1f %7.2f%%\n", start.Format("15:04"), start.Add(time.Hour).Format("15:04"), len(xs), mean, p99, 100*float64(slow)/float64(len(xs)))
		if len(xs) >= 10_000 { // a whole hour has 360,000; a short tail says little
			worstMean, worstP99 = max(worstMean, mean), max(worstP99, p99)
		}
	}
	b.Log("\n" + t.String())
	b.ReportMetric(worstMean, "worst-hour-mean-µs")
	b.ReportMetric(worstP99, "worst-hour-p99-µs")
}
