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
// placements slower than the overall p99, and what the overall p99 would
// be without it. It reports the overall p99-µs, and p99-without-gangs-µs.
//
//	go test -run '^$' -bench PlaceBreakdown -benchtime 150000x -v ./internal/market   # -v: the table is a log
func BenchmarkPlaceBreakdown(b *testing.B) {
	br := breakdown{}
	benchEngine(b, 100_000, benchOptions{observe: br.observe})
	br.report(b)
}

// breakdown is the latencies of a run's placements by kind.
type breakdown map[string][]time.Duration

// observe files one placement under its kind: the first that applies, in
// this order.
func (br breakdown) observe(j *idlegrid.Job, d market.Decision, advanced bool, took time.Duration) {
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
	fmt.Fprintf(&t, "%-22s %7s %6s %8s %8s %9s %6s %8s %13s\n", "kind", "n", "share", "mean µs", "p50 µs", "p99 µs", "time", ">p99", "p99 without")
	for _, kind := range slices.Sorted(maps.Keys(br)) {
		xs := br[kind]
		var sum time.Duration
		over := 0
		for _, x := range xs {
			sum += x
			if x > p99 {
				over++
			}
		}
		fmt.Fprintf(&t, "%-22s %7d %5.1f%% %8.1f %8.1f %9.1f %5.1f%% %7.1f%% %10.1f µs\n", kind, len(xs),
			100*float64(len(xs))/float64(len(all)), us(sum)/float64(len(xs)), us(quantile(xs, 0.5)), us(quantile(xs, 0.99)),
			100*float64(sum)/float64(total), 100*float64(over)/(float64(len(all))/100), us(br.p99Without(kind)))
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
