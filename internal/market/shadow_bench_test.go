package market_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/cputime"
)

// BenchmarkPlaceSaturated is Place alone (nothing is committed) on
// BenchmarkPlace's market with every open node's GPUs held but one node in
// five hundred's: most placements find no free runner-up, so their price
// comes from the shadow runner-up search. With one provider no busy node
// may compete and the search reads every candidate before the cap prices
// the job; with many it stops at the first competitor it can prove best.
func BenchmarkPlaceSaturated(b *testing.B) {
	for _, providers := range []int{1, 100} {
		b.Run(fmt.Sprintf("nodes=10000/providers=%d", providers), func(b *testing.B) {
			benchSaturated(b, 10_000, providers)
		})
	}
}

func benchSaturated(b *testing.B, n, providers int) {
	m := newPlaceMarket(n)
	for i, nd := range m.nodes {
		nd.ProviderID = fmt.Sprintf("prov-%d", i%providers)
	}
	held := map[string]bool{}
	for _, l := range m.leases {
		for _, u := range l.GPUUUIDs {
			held[u] = true
		}
	}
	for i, nd := range m.nodes {
		if i%500 == 0 || nd.Schedule.AvailableUntil(now).IsZero() {
			continue
		}
		var free []idlegrid.GPU
		for _, g := range nd.GPUs {
			if !held[g.UUID] {
				free = append(free, g)
			}
		}
		if len(free) > 0 {
			m.leases = append(m.leases, &idlegrid.Lease{ID: "sat-" + nd.ID, JobID: "jsat-" + nd.ID, NodeID: nd.ID,
				Tier: idlegrid.TierSilver, State: idlegrid.LeaseRunning, CreatedAt: now, StartedAt: &now,
				LimitSeconds: 3600, GPUUUIDs: gpuIDs(free)})
		}
	}
	e, _, _ := loadedEngine(m)
	lat := make(latencies, 0, 1<<20)
	waited := 0
	runtime.GC()
	cpu0, _ := cputime.Process()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if d := e.Place(m.jobs[i%len(m.jobs)], now); !d.Placed() {
			waited++
		}
		lat = append(lat, time.Since(t0))
	}
	lat.report(b, waited, cpu0)
}

func gpuIDs(gpus []idlegrid.GPU) []string {
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = g.UUID
	}
	return ids
}
