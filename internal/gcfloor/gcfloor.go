// Package gcfloor keeps the garbage collector's heap goal from falling
// below a floor.
//
// With Go's default GOGC=100 the collector runs whenever the heap doubles
// its live size. A process whose live heap is small but which allocates
// for every request (the server's HTTP API and inference gateway, whose
// few megabytes live are dwarfed by what passes through) then collects
// every few tens of milliseconds, and each cycle's marking takes a core
// for a millisecond or two: on two cores, that is most of a request's tail
// latency. A floor of a few hundred megabytes of heap goal makes those
// cycles rare, costs at most the floor in memory, and changes nothing once
// the live heap is large enough to set a goal above it.
//
// Run polls the live heap (as of the last collection) and sets the
// collector's percent to the larger of GOGC's default and what the floor
// needs. An operator's own GOGC, in the environment, wins: Run then does
// nothing. GOMEMLIMIT, when set, still bounds the heap as usual.
package gcfloor

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultFloor is the floor idlegrid server and dev keep, in bytes
// (--gc-floor-mib).
const DefaultFloor = 256 << 20

// basePercent is the collector's percent above the floor: GOGC's default.
const basePercent = 100

// liveHeap is the runtime metric Run reads: the heap the last collection
// found live.
const liveHeap = "/gc/heap/live:bytes"

// Percent returns the collector percent that gives a heap goal of at
// least floor bytes for live bytes live, and never less than base. The
// goal is live × (1 + percent/100).
func Percent(live, floor uint64, base int) int {
	live = max(live, 1<<20) // at start-up nothing is measured yet: assume a megabyte
	if live >= floor {
		return base
	}
	need := (floor - live) * 100 / live
	return max(base, int(min(need+1, 1<<30)))
}

// Run keeps the heap goal at or above floor bytes, reading the live heap
// every interval, until ctx is done; then it sets the percent back to the
// default and returns. With floor 0, or GOGC set in the environment, it
// returns at once and changes nothing.
func Run(ctx context.Context, floor uint64, interval time.Duration) {
	if floor == 0 {
		return
	}
	if _, ok := os.LookupEnv("GOGC"); ok {
		return
	}
	defer debug.SetGCPercent(basePercent)
	sample := []metrics.Sample{{Name: liveHeap}}
	set := -1
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		metrics.Read(sample)
		var live uint64
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = sample[0].Value.Uint64()
		}
		if p := Percent(live, floor, basePercent); changed(set, p) {
			debug.SetGCPercent(p)
			set = p
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Start runs Run on a goroutine of its own until the returned stop is
// called, which waits for it to end.
func Start(ctx context.Context, floor uint64, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, floor, interval)
	}()
	return func() {
		cancel()
		<-done
	}
}

// changed reports whether p differs enough from the percent set (-1:
// none yet) to be worth setting: by more than a tenth.
func changed(set, p int) bool {
	return set < 0 || p*10 > set*11 || p*11 < set*10
}
