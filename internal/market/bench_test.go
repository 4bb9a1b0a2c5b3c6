package market_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// BenchmarkFirstMatcher_Place is the naive baseline: one job against a
// market of n varied nodes, most of which fit. The auction engine will be
// measured against it.
func BenchmarkFirstMatcher_Place(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			s := benchMarket(n)
			j := newJob()
			j.GPUs = 2
			j.GPUModels = []string{"H100-80GB", "A100-80GB"}
			j.Residency = "EU"
			m := market.NewFirstMatcher()
			for b.Loop() {
				if d := m.Place(j, s); !d.Placed() {
					b.Fatalf("not placed: %s", d.Reason)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "placements/s")
		})
	}
}

func benchMarket(n int) *market.Snapshot {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	s := &market.Snapshot{Now: now}
	for i := range n {
		v := newView(fmt.Sprintf("node_%06d", i))
		model := []string{"H100-80GB", "A100-80GB", "RTX4090"}[r.IntN(3)]
		for k := range v.Node.GPUs {
			v.Node.GPUs[k].Model = model
		}
		v.FreeGPUs = v.Node.GPUs[:r.IntN(5)]
		v.Node.Region = []string{"eu-west", "eu-north", "us-east"}[r.IntN(3)]
		v.Node.Residency = map[string]string{"eu-west": "EU", "eu-north": "EU", "us-east": "US"}[v.Node.Region]
		v.Node.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = idlegrid.Micros(500000 + r.IntN(3000000))
		v.Node.Reliability = idlegrid.ReliabilityOf(int64(r.IntN(100)), int64(r.IntN(10)))
		v.AvailableUntil = now.Add(time.Duration(r.IntN(48)) * time.Hour)
		s.Nodes = append(s.Nodes, v)
	}
	return s
}
