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
// The floor is kept with a memory limit, not with GOGC. Under GOGC the
// runtime's scavenger aims to keep about 110% of the heap in use at the
// last collection: with a small live heap and a large goal it hands the
// pages each cycle freed back to the operating system, and the next cycle
// faults them in again, one page fault for every 4 KiB allocated. Under a
// memory limit alone (GOGC off) it keeps pages up to 95% of the limit, so
// a cycle reuses the pages the last one freed.
//
// Run polls the runtime's memory every interval. While twice the live heap
// (as of the last collection), GOGC's default goal, is under the floor, it
// turns GOGC off and sets the memory limit to the floor plus the runtime's
// memory outside the heap; once the default goal reaches the floor, it
// sets GOGC back to 100 and lifts the limit. An operator's own GOGC or
// GOMEMLIMIT, in the environment, wins: Run then does nothing.
package gcfloor

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultFloor is the floor idlegrid server and dev keep, in bytes
// (--gc-floor-mib).
const DefaultFloor = 256 << 20

// DefaultInterval is how often idlegrid server and dev read the runtime's
// memory. Under the limit a live heap that outgrew the floor between two
// reads makes the collector run back to back (at most half the CPU, the
// runtime's own cap) until the next read lifts the limit, so reads are
// frequent; each costs a few microseconds.
const DefaultInterval = 100 * time.Millisecond

// basePercent is GOGC's default, which applies above the floor.
const basePercent = 100

// The runtime metrics Run reads.
var sampleNames = [...]string{
	"/gc/heap/live:bytes",                 // the heap the last collection found live
	"/memory/classes/total:bytes",         // all the runtime has mapped
	"/memory/classes/heap/released:bytes", // of which returned to the OS
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/unused:bytes",
}

// Memory is what Run reads of the runtime's memory, in bytes.
type Memory struct {
	Live  uint64 // the heap the last collection found live
	Other uint64 // mapped and not released, outside the heap's spans: stacks, the runtime's own
}

// readMemory reads the runtime's memory, into samples (of sampleNames).
func readMemory(samples []metrics.Sample) Memory {
	metrics.Read(samples)
	var v [len(sampleNames)]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	total, released, heap := v[1], v[2], v[3]+v[4]+v[5]
	var other uint64
	if total > released+heap {
		other = total - released - heap
	}
	return Memory{Live: v[0], Other: other}
}

// Limit returns the memory limit that keeps the heap goal at the floor for
// a process using m, or 0 when GOGC's default goal, twice the live heap,
// already reaches it (no limit is needed).
func Limit(m Memory, floor uint64) uint64 {
	if m.Live+m.Live*basePercent/100 >= floor {
		return 0
	}
	return floor + m.Other
}

// Run keeps the heap goal at or above floor bytes, reading the runtime's
// memory every interval, until ctx is done; then it sets GOGC back to its
// default, lifts the memory limit and returns. With floor 0, or GOGC or
// GOMEMLIMIT set in the environment, it returns at once and changes
// nothing.
func Run(ctx context.Context, floor uint64, interval time.Duration) {
	if floor == 0 {
		return
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := os.LookupEnv(env); ok {
			return
		}
	}
	samples := make([]metrics.Sample, len(sampleNames))
	for i, name := range sampleNames {
		samples[i].Name = name
	}
	var k keeper
	defer k.set(0)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		k.set(Limit(readMemory(samples), floor))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// keeper holds the limit Run set last.
type keeper struct {
	limit uint64 // 0: none, GOGC at its default
}

// set sets the memory limit (GOGC off), or with 0 GOGC's default and no
// limit; a limit within a sixteenth of the one set is left as it is. The
// limit goes on before GOGC goes off, and GOGC back on before the limit
// is lifted, so that the heap is never unbounded between the two.
func (k *keeper) set(limit uint64) {
	switch {
	case limit == 0 && k.limit != 0:
		debug.SetGCPercent(basePercent)
		debug.SetMemoryLimit(math.MaxInt64)
	case limit != 0 && (k.limit == 0 || differs(limit, k.limit)):
		debug.SetMemoryLimit(int64(min(limit, math.MaxInt64)))
		if k.limit == 0 {
			debug.SetGCPercent(-1)
		}
	default:
		return
	}
	k.limit = limit
}

// differs reports whether a and b differ by more than a sixteenth of b.
func differs(a, b uint64) bool {
	d := max(a, b) - min(a, b)
	return d > b/16
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
