package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// TestBaseline_matchesFirstMatcher checks the baselines' index against a
// full scan on many small random markets: pay-as-bid must pick what
// market.FirstMatcher picks, at the same price; cheapest-first what
// FirstMatcher picks when every node is perfectly reliable; FIFO the
// first fitting node in order.
func TestBaseline_matchesFirstMatcher(t *testing.T) {
	models := []string{"T4", "V100-32GB", "A100-80GB"}
	regions := []string{"eu-west", "us-east"}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 99))
		w, r := randomMarket(rng, models, regions)
		for _, o := range []order{orderFIFO, orderCheapest, orderPayAsBid} {
			b := newBaseline(w, o)
			b.start(r)
			for k := range 20 {
				j := randomJob(rng, w, r.now)
				got := b.place(j, r.now)
				wantNode, wantPrice, ok := reference(w, r, j, o)
				switch {
				case !ok && len(got.picks) > 0:
					t.Fatalf("seed %d %s job %d: placed on %s, want no placement", seed, o.name(), k, w.nodes[got.picks[0].node].id)
				case ok && len(got.picks) == 0:
					t.Fatalf("seed %d %s job %d: not placed (%s), want %s", seed, o.name(), k, got.reason, wantNode)
				case ok && (w.nodes[got.picks[0].node].id != wantNode || got.picks[0].price != wantPrice):
					t.Fatalf("seed %d %s job %d: %s at %s, want %s at %s", seed, o.name(), k,
						w.nodes[got.picks[0].node].id, got.picks[0].price, wantNode, wantPrice)
				}
			}
		}
	}
}

// randomMarket makes a world of up to 40 nodes, some with windows open,
// some busy, with asks that tier floors divide exactly, and records.
func randomMarket(rng *rand.Rand, models, regions []string) (*world, *replay) {
	const now = 1_700_000_000
	w := &world{start: now - 3600, end: now + 86400, regions: []string{""}, modelSets: [][]string{nil}}
	w.cfg.Seed = 1
	w.modelSets = append(w.modelSets, []string{models[0]}, []string{models[1], models[2]})
	w.regions = append(w.regions, regions...)
	n := 1 + rng.IntN(40)
	for i := range n {
		sn := &simNode{
			idx: int32(i), id: fmt.Sprintf("n%03d", i), model: models[rng.IntN(len(models))], gpus: 1 + rng.IntN(8),
			region: regions[rng.IntN(len(regions))], ask: idlegrid.Micros(20 * (5000 + rng.IntN(100000))),
		}
		sn.windows = []span{{now - 3600, now + int64(600+rng.IntN(40000))}}
		sn.vramMB = 16384
		w.nodes = append(w.nodes, sn)
	}
	w.offeredBins = make([]int64, 1)
	w.binSeconds = w.end - w.start
	r := newReplay(w, newBaseline(w, orderFIFO), 0, 1)
	r.now = now
	for _, ns := range r.nodes {
		ns.completed, ns.failed = int64(rng.IntN(50)), int64(rng.IntN(8))
		ns.open = rng.IntN(5) > 0
		ns.used = rng.IntN(ns.n.gpus + 1)
	}
	return w, r
}

func randomJob(rng *rand.Rand, w *world, now int64) *liveJob {
	spec := &jobSpec{
		gpus: int8(1 + rng.IntN(8)), tier: int8(rng.IntN(3)), models: uint16(rng.IntN(len(w.modelSets))),
		region: uint16(rng.IntN(len(w.regions))), cap: idlegrid.Micros(100_000 + rng.IntN(3_000_000)),
		dur: int32(60 + rng.IntN(20000)),
	}
	if rng.IntN(3) == 0 { // a cap exactly at some node's floor
		spec.cap = floorOf(w.nodes[rng.IntN(len(w.nodes))].ask, spec.tierOf())
	}
	return &liveJob{spec: spec, remaining: int64(spec.dur), arrived: now}
}

// reference decides with a full scan: FirstMatcher over a snapshot of the
// same market for pay-as-bid and cheapest-first, the first fitting node
// for FIFO.
func reference(w *world, r *replay, j *liveJob, o order) (string, idlegrid.Micros, bool) {
	now := time.Unix(r.now, 0)
	job := &idlegrid.Job{ID: "j", JobSpec: idlegrid.JobSpec{
		GPUs: int(j.spec.gpus), Nodes: 1, Tier: j.spec.tierOf(), Kind: idlegrid.KindOther,
		MaxPriceMicrosPerGPUHour: j.spec.cap, DurationSeconds: j.remaining,
		GPUModels: w.modelSets[j.spec.models], Region: w.regions[j.spec.region],
	}}
	s := &market.Snapshot{Now: now}
	for _, ns := range r.nodes {
		sn := ns.n
		n := &idlegrid.Node{ID: sn.id, Reliability: ns.reliability()}
		if o == orderCheapest {
			n.Reliability = 1
		}
		n.Region = sn.region
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{}
		for _, t := range idlegrid.Tiers {
			n.Ask.FloorMicrosPerGPUHour[t] = floorOf(sn.ask, t)
		}
		for g := range sn.gpus {
			n.GPUs = append(n.GPUs, idlegrid.GPU{UUID: fmt.Sprintf("%s/%d", sn.id, g), Model: sn.model, VRAMMB: sn.vramMB})
		}
		v := &market.NodeView{Node: n}
		if ns.open {
			v.AvailableUntil = time.Unix(sn.windows[0].end, 0)
			v.FreeGPUs = n.GPUs[:sn.gpus-ns.used]
		}
		if o == orderFIFO {
			if d := market.NewFirstMatcher().Place(job, &market.Snapshot{Now: now, Nodes: []*market.NodeView{v}}); d.Placed() {
				return sn.id, d.Picks[0].PriceMicrosPerGPUHour, true
			}
			continue
		}
		s.Nodes = append(s.Nodes, v)
	}
	if o == orderFIFO {
		return "", 0, false
	}
	d := market.NewFirstMatcher().Place(job, s)
	if !d.Placed() {
		return "", 0, false
	}
	return d.Picks[0].Node.ID, d.Picks[0].PriceMicrosPerGPUHour, true
}
