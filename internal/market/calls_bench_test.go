package market_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkPlaceCalls runs BenchmarkPlace's loop and reports the CPU time
// of the loop's own thread in each engine call, per placement:
// advance-, place-, commit-, addlease- and remove-cpu-µs, and their sum,
// engine-cpu-µs. Building the leases, which the coordinator does, is left
// out. On a machine shared with other work these move much less than wall
// time, so two engines are best compared by them, run alternately.
//
// Run: go test -run '^$' -bench BenchmarkPlaceCalls -benchtime 80000x ./internal/market
func BenchmarkPlaceCalls(b *testing.B) {
	if _, ok := threadCPUTime(); !ok {
		b.Skip("no per-thread CPU clock here")
	}
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchCalls(b, n) })
	}
}

// callTimes adds up thread CPU time per kind of engine call.
type callTimes struct {
	last time.Duration
	sums [5]time.Duration // advance, place, commit, addlease, remove
}

// lap adds the thread CPU time since the last lap to kind k; k < 0 only
// starts the next lap.
func (c *callTimes) lap(k int) {
	t, _ := threadCPUTime()
	if k >= 0 {
		c.sums[k] += t - c.last
	}
	c.last = t
}

func (c *callTimes) report(b *testing.B) {
	var total time.Duration
	for k, name := range []string{"advance", "place", "commit", "addlease", "remove"} {
		b.ReportMetric(float64(c.sums[k].Nanoseconds())/1000/float64(max(b.N, 1)), name+"-cpu-µs")
		total += c.sums[k]
	}
	b.ReportMetric(float64(total.Nanoseconds())/1000/float64(max(b.N, 1)), "engine-cpu-µs")
}

func benchCalls(b *testing.B, n int) {
	runtime.LockOSThread() // the thread's clock must be the loop's
	defer runtime.UnlockOSThread()
	l := newPlaceLoop(n, false)
	runtime.GC()
	var c callTimes
	l.lap = c.lap
	for i := 0; b.Loop(); i++ {
		l.step(i)
	}
	c.report(b)
}
