package market

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// A node whose reputation moves is moved along its shelves in place: after
// any number of moves each shelf must be exactly as a rebuild would leave
// it, but for what a rebuild may tighten (the least reliabilities, the
// ordered flags), which must still hold.
func TestShelf_restand(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(1, 2))
	e := NewEngine(Config{GoldMinReliability: 0.7}) // moves cross the gold bar
	e.Advance(at)
	var nodes []*idlegrid.Node
	for i := range 300 {
		// All start equally reliable, so that bronze, whose asks rise with
		// silver's but not in proportion, starts ordered, and moves can
		// break that.
		n := &idlegrid.Node{ID: fmt.Sprintf("n%03d", i), ProviderID: fmt.Sprintf("p%d", i%7), State: idlegrid.NodeOnline, Reliability: 1}
		n.GPUs = []idlegrid.GPU{{UUID: fmt.Sprintf("g%03d-0", i), Model: "L4", VRAMMB: 24576}, {UUID: fmt.Sprintf("g%03d-1", i), Model: "L4", VRAMMB: 24576}}
		n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
		silver := idlegrid.Micros(1_000_000 + r.IntN(400)*2_500)
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: silver, idlegrid.TierBronze: silver * silver / 3_000_000}
		if i%3 != 0 {
			n.Ask.FloorMicrosPerGPUHour[idlegrid.TierGold] = 3_000_000 - silver/2
		}
		if i%5 == 0 {
			n.CachedDatasets = []string{"c4"} // on a sub-shelf too
		}
		nodes = append(nodes, n)
		e.UpsertNode(n)
		if i%2 == 0 { // some busy, so entries differ
			started := at.Add(-time.Hour)
			e.AddLease(&idlegrid.Lease{ID: "l" + n.ID, JobID: "j" + n.ID, NodeID: n.ID, Tier: idlegrid.TierBronze, State: idlegrid.LeaseRunning,
				CreatedAt: started, StartedAt: &started, LimitSeconds: 7200, GPUUUIDs: []string{n.GPUs[0].UUID}})
		}
	}
	e.Advance(at) // clean: the moves below are made in place
	if s := e.nodes["n000"].shelves[0]; !s.ordered[2] {
		t.Fatal("bronze starts unordered; the test wants it ordered")
	}
	for step := range 2000 {
		i := r.IntN(len(nodes))
		moved := *nodes[i]
		moved.Reliability = 0.4 + 0.6*r.Float64()
		if step%10 == 0 {
			moved.Reliability = nodes[i].Reliability * (1 + 0.002*(r.Float64()-0.5)) // a small step: a short move
		}
		nodes[i] = &moved
		e.UpsertNode(&moved)
		nd := e.nodes[moved.ID]
		if nd.views != viewsOf(nd, e.cfg) || nd.rel != clampReliability(moved.Reliability) {
			t.Fatalf("step %d: %s's views or reliability not its new record's", step, nd.id)
		}
		for _, s := range nd.shelves {
			if s.dirty {
				t.Fatalf("step %d: a move marked the shelf dirty; want it made in place", step)
			}
			checkShelf(t, fmt.Sprintf("step %d", step), s)
		}
		if step%7 == 0 { // the ranked lists, patched from the log of moves, or reranked
			s := nd.shelves[0]
			for _, ti := range []int{0, 1, 2} {
				for _, w := range []float64{1, 0.5} {
					e.mark++
					if got, want := s.ranked(ti, w, e.mark), freshRanking(s, ti, w); !slices.Equal(got, want) {
						t.Fatalf("step %d: tier %d weight %v: the ranked list differs from a fresh ranking", step, ti, w)
					}
				}
			}
		}
	}
}

// freshRanking is tier ti's view of s ranked at weight w from scratch.
func freshRanking(s *shelf, ti int, w float64) []rankedNode {
	var out []rankedNode
	for _, nd := range s.order {
		if nd.inView(ti) {
			out = append(out, rankedNode{score: scoreOf(nd.asks[ti], 0, nd.rel, w), nd: nd})
		}
	}
	slices.SortFunc(out, compareRanked)
	return out
}

// checkShelf holds a clean shelf to what clean would build.
func checkShelf(t *testing.T, when string, s *shelf) {
	t.Helper()
	for k, nd := range s.order {
		if k > 0 && compareOrder(s.order[k-1], nd) >= 0 {
			t.Fatalf("%s: %s before %s out of order", when, s.order[k-1].id, nd.id)
		}
		if p := *nd.posIn(s); int(p) != k {
			t.Fatalf("%s: %s at %d, its pos says %d", when, nd.id, k, p)
		}
		if s.leaves[k] != nd.leaf || s.leafPlans[k] != nd.leafPlan {
			t.Fatalf("%s: the entry at %d is not %s's", when, k, nd.id)
		}
		if a, p := s.e.entries(nd); a != nd.leaf || p != nd.leafPlan {
			t.Fatalf("%s: %s's entry is stale", when, nd.id)
		}
		for ti := range tierCount {
			if want := float64(nd.asks[ti]) / nd.rel; nd.s1[ti] != want {
				t.Fatalf("%s: %s's tier %d score %v is stale, want %v", when, nd.id, ti, nd.s1[ti], want)
			}
		}
	}
	blocks := (len(s.order) + blockLen - 1) / blockLen
	for j := range blocks {
		if s.agg[s.size+j] != s.sumBlock(j) || s.plan[s.size+j] != s.sumBlockPlan(j) {
			t.Fatalf("%s: block %d's sum is stale", when, j)
		}
	}
	for k := s.size - 1; k >= 1; k-- {
		if s.agg[k] != combine(s.agg[2*k], s.agg[2*k+1]) || s.plan[k] != combinePlan(s.plan[2*k], s.plan[2*k+1]) {
			t.Fatalf("%s: tree node %d's sum is stale", when, k)
		}
	}
	if s.root != s.agg[1] {
		t.Fatalf("%s: the root is stale", when)
	}
	for ti := range tierCount {
		n := 0
		for _, nd := range s.order {
			if nd.inView(ti) {
				n++
			}
		}
		var least idlegrid.Micros
		var bySize [lbMax + 1]int32
		for _, nd := range s.order {
			if nd.inView(ti) && (least == 0 || nd.asks[ti] < least) {
				least = nd.asks[ti]
			}
			if nd.inView(ti) {
				bySize[min(len(nd.gpus), lbMax)]++
			}
		}
		if bySize != s.bySize[ti] {
			t.Fatalf("%s: tier %d's view by GPUs counted %v, holds %v", when, ti, s.bySize[ti], bySize)
		}
		if got := s.leastAskOf(ti); got != least {
			t.Fatalf("%s: tier %d's least ask %v, its view's is %v", when, ti, got, least)
		}
		if n != s.inView[ti] {
			t.Fatalf("%s: tier %d's view counted %d, holds %d", when, ti, s.inView[ti], n)
		}
		var last float64
		for _, nd := range s.order {
			if !nd.inView(ti) {
				continue
			}
			if lowFloat32(nd.rel) < s.relMin[ti] {
				t.Fatalf("%s: tier %d's least reliability %v is above %s's %v", when, ti, s.relMin[ti], nd.id, nd.rel)
			}
			if s.ordered[ti] && nd.s1[ti] < last {
				t.Fatalf("%s: tier %d is marked ordered, but %s's score falls", when, ti, nd.id)
			}
			last = nd.s1[ti]
		}
	}
}

// A move across the gold bar changes which nodes a gold job's wait reason
// counts as matching.
func TestRestand_waitReason(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e := NewEngine(Config{GoldMinReliability: 0.9})
	e.Advance(at)
	var nodes []*idlegrid.Node
	for i := range 3 {
		n := &idlegrid.Node{ID: fmt.Sprintf("n%d", i), ProviderID: "p", State: idlegrid.NodeOnline, Reliability: 0.95}
		n.GPUs = []idlegrid.GPU{{UUID: fmt.Sprintf("g%d", i), Model: "L4", VRAMMB: 24576}}
		n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierGold: 2_000_000, idlegrid.TierSilver: 1_000_000}
		nodes = append(nodes, n)
		e.UpsertNode(n)
	}
	job := &idlegrid.Job{ID: "j", JobSpec: idlegrid.JobSpec{Kind: idlegrid.KindTraining, GPUs: 1, Nodes: 1, Tier: idlegrid.TierGold,
		MaxPriceMicrosPerGPUHour: 500_000, DurationSeconds: 600}} // below every gold ask: it waits
	if d := e.Place(job, at); d.Placed() || !strings.HasPrefix(d.Reason, "no node fits: 3 cap below ask;") {
		t.Fatalf("before: %q, want the 3 matching nodes' asks above the cap", d.Reason)
	}
	moved := *nodes[0]
	moved.Reliability = 0.8 // below the gold bar
	e.UpsertNode(&moved)
	if d := e.Place(job, at); d.Placed() || !strings.HasPrefix(d.Reason, "no node fits: 2 cap below ask, 1 reliability bar;") {
		t.Fatalf("after n0 fell below the bar: %q, want 2 matching above the cap and 1 under the reliability bar", d.Reason)
	}
}

// A caller that changes a node's record in place and passes the same
// pointer again is heard: the engine compares the new offer with its own
// copy, not with the record it holds, which changed with it.
func TestRestand_recordChangedInPlace(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e := NewEngine(Config{})
	e.Advance(at)
	n := &idlegrid.Node{ID: "n", ProviderID: "p", State: idlegrid.NodeOnline, Reliability: 0.9}
	n.GPUs = []idlegrid.GPU{{UUID: "g", Model: "L4", VRAMMB: 24576}}
	n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
	n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 2_000_000}
	e.UpsertNode(n)
	job := &idlegrid.Job{ID: "j", JobSpec: idlegrid.JobSpec{Kind: idlegrid.KindTraining, GPUs: 1, Nodes: 1, Tier: idlegrid.TierSilver,
		MaxPriceMicrosPerGPUHour: 1_000_000, DurationSeconds: 600}}
	if d := e.Place(job, at); d.Placed() {
		t.Fatal("placed below the ask")
	}
	n.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 500_000 // the same record, changed in place
	n.Reliability = 0.95
	e.UpsertNode(n)
	if d := e.Place(job, at); !d.Placed() {
		t.Fatalf("the new ask within the cap was not heard: %s", d.Reason)
	}
}
