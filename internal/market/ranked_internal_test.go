package market

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// A shelf's ranked lists must rank its view by the score a search computes,
// for any tier and weight, keep no more than rankedMax of them, and follow
// the shelf when a rebuild changes what ranks a node.
func TestRankedLists(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e := NewEngine(Config{GoldMinReliability: 0.5})
	e.Advance(at)
	for i := range 40 {
		n := &idlegrid.Node{ID: fmt.Sprintf("n%02d", i), ProviderID: "p", State: idlegrid.NodeOnline, Reliability: 0.3 + float64(i%7)/10}
		n.GPUs = []idlegrid.GPU{{UUID: fmt.Sprintf("g%02d", i), Model: "L4", VRAMMB: 24576}}
		n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
		silver := idlegrid.Micros(1_000_000 + 37_000*((i*13)%40))
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: silver, idlegrid.TierBronze: silver / 2}
		if i%3 != 0 { // a third sell no gold; the rest ask for it out of step with silver
			n.Ask.FloorMicrosPerGPUHour[idlegrid.TierGold] = 3_000_000 - silver/2
		}
		e.UpsertNode(n)
	}
	s := e.nodes["n00"].shelves[0]
	weights := []float64{1, 0.5, 2, 0.25, 3, 1.5, 0.75, 4, 0.1, 1.1, 2.5, 5, 0.9}
	for round := range 2 {
		for ti := range tierCount {
			for _, w := range weights {
				e.mark++
				rs := s.ranked(ti, w, e.mark)
				want := 0
				for _, nd := range s.order {
					if nd.inView(ti) {
						want++
					}
				}
				if len(rs) != want {
					t.Fatalf("round %d tier %d w %v: %d ranked, want the %d nodes in view", round, ti, w, len(rs), want)
				}
				for i, r := range rs {
					if got := scoreOf(r.nd.asks[ti], 0, r.nd.rel, w); got != r.score {
						t.Fatalf("tier %d w %v: %s ranked at %v, scores %v", ti, w, r.nd.id, r.score, got)
					}
					if i > 0 && (rs[i-1].score > r.score || (rs[i-1].score == r.score && rs[i-1].nd.id > r.nd.id)) {
						t.Fatalf("tier %d w %v: %s before %s out of rank order", ti, w, rs[i-1].nd.id, r.nd.id)
					}
				}
			}
		}
		used := 0
		for _, r := range s.ranks {
			if r.gen == s.gen {
				used++
			}
		}
		if used > rankedMax {
			t.Fatalf("%d lists kept, want at most %d", used, rankedMax)
		}
		// A new ask for the cheapest node rebuilds the shelf: the lists follow.
		first := s.ranked(1, 1, e.mark)[0].nd
		n := *first.n
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 9_000_000}
		e.UpsertNode(&n)
		got := s.ranked(1, 1, e.mark)
		i := slices.IndexFunc(got, func(r rankedNode) bool { return r.nd.id == n.ID })
		if want := scoreOf(9_000_000, 0, first.rel, 1); i < 0 || got[i].score != want {
			t.Fatalf("%s now asks $9: ranked at %d of %d, want it there with score %v", n.ID, i, len(got), want)
		}
	}
}

// When only prices change (time-of-day multipliers starting and ending),
// the lists are reranked in place rather than built again: they must come
// out exactly as a fresh ranking would.
func TestRankedLists_rerankOnPrices(t *testing.T) {
	at := time.Date(2026, 11, 30, 5, 30, 0, 0, time.UTC)
	e := NewEngine(Config{GoldMinReliability: 0.5})
	e.Advance(at)
	for i := range 60 {
		n := &idlegrid.Node{ID: fmt.Sprintf("n%02d", i), ProviderID: "p", State: idlegrid.NodeOnline, Reliability: 0.4 + float64(i%6)/10}
		n.GPUs = []idlegrid.GPU{{UUID: fmt.Sprintf("g%02d", i), Model: "L4", VRAMMB: 24576}}
		n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
		silver := idlegrid.Micros(1_000_000 + 29_000*((i*17)%60))
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: silver, idlegrid.TierBronze: silver / 2, idlegrid.TierGold: 4_000_000 - silver}
		switch i % 4 { // a quarter keep one price all day
		case 1:
			n.Ask.TimeOfDay = []idlegrid.PriceWindow{{Start: "06:00", End: "08:00", MultiplierPercent: 150}}
		case 2:
			n.Ask.TimeOfDay = []idlegrid.PriceWindow{{Start: "07:00", End: "09:00", MultiplierPercent: 60}}
		case 3:
			n.Ask.TimeOfDay = []idlegrid.PriceWindow{{Start: "06:00", End: "07:00", MultiplierPercent: 130}, {Start: "08:00", End: "10:00", MultiplierPercent: 80}}
		}
		e.UpsertNode(n)
	}
	e.Advance(at)
	s := e.nodes["n00"].shelves[0]
	weights := []float64{1, 0.5, 2}
	check := func(when string) {
		t.Helper()
		for ti := range tierCount {
			for _, w := range weights {
				e.mark++
				got := s.ranked(ti, w, e.mark)
				var want []rankedNode
				for _, nd := range s.order {
					if nd.inView(ti) {
						want = append(want, rankedNode{score: scoreOf(nd.asks[ti], 0, nd.rel, w), nd: nd})
					}
				}
				slices.SortFunc(want, compareRanked)
				if !slices.Equal(got, want) {
					t.Fatalf("%s, tier %d, weight %v: ranked list differs from a fresh ranking", when, ti, w)
				}
			}
		}
	}
	check("before any multiplier")
	members := s.members
	for h := range 5 { // 06:30 to 10:30: multipliers started or ended in each hour
		gen := s.gen
		e.Advance(at.Add(time.Duration(h+1) * time.Hour))
		if s.gen == gen {
			t.Fatalf("hour %d: the shelf was not rebuilt for the new prices", h)
		}
		check(fmt.Sprintf("after hour %d", h))
	}
	if s.members != members {
		t.Fatalf("prices alone changed the shelf's members (%v → %v)", members, s.members)
	}
}

// BenchmarkRankedAfterPrices is what a shadow search's first ranked list
// costs after a time-of-day price change rebuilt its shelf: reranked (the
// list's nodes are the same, a fifth have new scores) against built
// afresh, as every rebuild did before, in the same run. One shelf of
// 20,000 nodes, gold view, reliability weight 0.5. Each round first moves
// the engine's clock a day and an hour, untimed (the price events and the
// shelf's rebuild take far longer than the list), so give it a count:
//
//	go test -run '^$' -bench RankedAfterPrices -benchtime 200x ./internal/market
func BenchmarkRankedAfterPrices(b *testing.B) {
	at := time.Date(2026, 11, 30, 8, 30, 0, 0, time.UTC)
	e := NewEngine(Config{GoldMinReliability: 0.5})
	e.Advance(at)
	for i := range 20000 {
		n := &idlegrid.Node{ID: fmt.Sprintf("n%05d", i), ProviderID: fmt.Sprintf("p%d", i%2000), State: idlegrid.NodeOnline, Reliability: 0.5 + float64(i%50)/100}
		n.GPUs = []idlegrid.GPU{{UUID: fmt.Sprintf("g%05d", i), Model: "L4", VRAMMB: 24576}}
		n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
		silver := idlegrid.Micros(1_000_000 + 97*((i*7919)%10007))
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: silver, idlegrid.TierGold: 3_000_000 - silver/3}
		if i%5 == 0 {
			n.Ask.TimeOfDay = []idlegrid.PriceWindow{{Start: "09:00", End: "18:00", MultiplierPercent: 130}}
		}
		e.UpsertNode(n)
	}
	e.Advance(at)
	s := e.nodes["n00000"].shelves[0]
	step := 0 // the clock only moves on, across sub-benchmarks and counts
	for _, mode := range []string{"rerank", "rebuild"} {
		b.Run(mode, func(b *testing.B) {
			e.mark++
			s.ranked(0, 0.5, e.mark)
			for b.Loop() {
				b.StopTimer()
				step++ // 08:30 and 09:30 on following days: the multiplier is on, or not yet
				gen := s.gen
				e.Advance(at.Add(time.Duration(step)*24*time.Hour + time.Duration(step%2)*time.Hour))
				if s.gen == gen {
					b.Fatal("the prices did not change: nothing to rerank")
				}
				if mode == "rebuild" {
					s.joined() // as if a node had joined the shelf: the list is built again
				}
				e.mark++
				b.StartTimer()
				s.ranked(0, 0.5, e.mark)
			}
		})
	}
}
