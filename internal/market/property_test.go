package market_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// TestFirstMatcher_Place_bruteForce compares the matcher with a reference
// that checks every constraint on its own and enumerates every choice of
// nodes, on many small random markets.
func TestFirstMatcher_Place_bruteForce(t *testing.T) {
	rounds := 5000
	if testing.Short() {
		rounds = 500
	}
	m := market.NewFirstMatcher()
	placed, placedMulti := 0, 0
	for seed := range uint64(rounds) {
		r := rand.New(rand.NewPCG(seed, 42))
		s := randomMarket(r)
		j := randomJob(r)
		got := m.Place(j, s)
		want := reference(j, s)
		if got.Placed() {
			placed++
			if j.Nodes > 1 {
				placedMulti++
			}
		}
		if err := compare(j, s, got, want); err != nil {
			t.Fatalf("seed %d: %v\njob %+v\nmarket:\n%s", seed, err, j.JobSpec, describe(s))
		}
	}
	t.Logf("placed %d of %d random jobs, %d on several nodes", placed, rounds, placedMulti)
	// The generator must exercise every outcome, or the test proves little.
	if placed < rounds/5 || placed > rounds*4/5 || placedMulti < rounds/25 {
		t.Errorf("placed %d of %d random jobs, %d on several nodes; tune the generator", placed, rounds, placedMulti)
	}
}

var (
	models  = []string{"H100-80GB", "h100-80gb", "A100-40GB", "RTX4090"}
	regions = []string{"eu-west", "us-east", "eu-west", "us-east", "ap-south"}
	resid   = []string{"EU", "US", "eu"}
)

func randomMarket(r *rand.Rand) *market.Snapshot {
	s := &market.Snapshot{Now: now}
	for i := range r.IntN(13) {
		v := &market.NodeView{Node: &idlegrid.Node{ID: fmt.Sprintf("node_%02d", r.IntN(50)*100+i)}}
		n := v.Node
		for g := range 1 + r.IntN(5) {
			gpu := idlegrid.GPU{
				UUID:   fmt.Sprintf("%s-gpu-%d", n.ID, r.IntN(10)*10+g),
				Model:  models[r.IntN(len(models))],
				VRAMMB: []int{24576, 40960, 81920}[r.IntN(3)],
			}
			n.GPUs = append(n.GPUs, gpu)
			if r.IntN(4) > 0 {
				v.FreeGPUs = append(v.FreeGPUs, gpu)
			}
		}
		n.CPUCores = r.IntN(5) * 8
		n.RAMMB = r.IntN(5) * 64000
		n.Region = regions[r.IntN(len(regions))]
		n.Residency = resid[r.IntN(len(resid))]
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{}
		for _, tier := range idlegrid.Tiers {
			if r.IntN(8) > 0 {
				// Few distinct prices, so that ties happen.
				n.Ask.FloorMicrosPerGPUHour[tier] = idlegrid.Micros(r.IntN(5)) * 500000 // zero: tier not sold
			}
		}
		if r.IntN(6) == 0 {
			n.Ask.AllowedKinds = []idlegrid.WorkloadKind{idlegrid.KindInference, idlegrid.KindEval}
		}
		if r.IntN(6) == 0 {
			n.Ask.MaxJobSeconds = int64(r.IntN(4)) * 3600
		}
		n.Reliability = []float64{1, 0.9, 0.5, 0.25, 0, -1, 2}[r.IntN(7)]
		if r.IntN(8) > 0 {
			v.AvailableUntil = now.Add(time.Duration(r.IntN(10)) * time.Hour)
		}
		s.Nodes = append(s.Nodes, v)
	}
	return s
}

func randomJob(r *rand.Rand) *idlegrid.Job {
	j := newJob()
	j.GPUs = []int{1, 1, 2, 3}[r.IntN(4)]
	j.Nodes = []int{1, 1, 1, 2, 3}[r.IntN(5)]
	j.Tier = idlegrid.Tiers[r.IntN(3)]
	j.Kind = []idlegrid.WorkloadKind{idlegrid.KindTraining, idlegrid.KindEval}[r.IntN(2)]
	j.MaxPriceMicrosPerGPUHour = idlegrid.Micros(1+r.IntN(5)) * 500000
	j.DurationSeconds = int64(1+r.IntN(2)) * 3600
	if r.IntN(5) == 0 {
		j.GPUModels = []string{models[r.IntN(len(models))]}
	}
	if r.IntN(5) == 0 {
		j.MinVRAMMB = []int{24576, 40960, 81920}[r.IntN(3)]
	}
	if r.IntN(5) == 0 {
		j.CPUCores = 8 * r.IntN(3)
	}
	if r.IntN(5) == 0 {
		j.RAMMB = 64000 * r.IntN(3)
	}
	if r.IntN(4) == 0 {
		j.Region = regions[r.IntN(len(regions))]
		j.RegionPreferred = r.IntN(2) == 0
	}
	if r.IntN(5) == 0 {
		j.Residency = resid[r.IntN(len(resid))]
	}
	return j
}

// verdict is the reference's view of one node.
type verdict struct {
	view   *market.NodeView
	reason market.Reason
	floor  idlegrid.Micros
	score  float64
	pref   bool
}

// rule is one hard constraint as the reference states it: ok reports
// whether the node passes.
type rule struct {
	reason market.Reason
	ok     func(j *idlegrid.Job, s *market.Snapshot, v *market.NodeView) bool
}

func eqFold(a, b string) bool { return strings.EqualFold(a, b) }

func allowedModel(j *idlegrid.Job, g idlegrid.GPU) bool {
	if len(j.GPUModels) == 0 {
		return true
	}
	return slices.ContainsFunc(j.GPUModels, func(m string) bool { return eqFold(m, g.Model) })
}

var rules = []rule{
	{market.ReasonTier, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return v.Node.Ask.FloorMicrosPerGPUHour[j.Tier] > 0
	}},
	{market.ReasonKind, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return len(v.Node.Ask.AllowedKinds) == 0 || slices.Contains(v.Node.Ask.AllowedKinds, j.Kind)
	}},
	{market.ReasonMaxDuration, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return v.Node.Ask.MaxJobSeconds == 0 || j.DurationSeconds <= v.Node.Ask.MaxJobSeconds
	}},
	{market.ReasonRegion, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return j.Region == "" || j.RegionPreferred || j.Region == v.Node.Region
	}},
	{market.ReasonResidency, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return j.Residency == "" || eqFold(j.Residency, v.Node.Residency)
	}},
	{market.ReasonGPUModel, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return slices.ContainsFunc(v.Node.GPUs, func(g idlegrid.GPU) bool { return allowedModel(j, g) })
	}},
	{market.ReasonVRAM, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return slices.ContainsFunc(v.Node.GPUs, func(g idlegrid.GPU) bool { return allowedModel(j, g) && g.VRAMMB >= j.MinVRAMMB })
	}},
	{market.ReasonGPUs, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		n := 0
		for _, g := range v.Node.GPUs {
			if allowedModel(j, g) && g.VRAMMB >= j.MinVRAMMB {
				n++
			}
		}
		return n >= max(j.GPUs, 1)
	}},
	{market.ReasonCPU, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return v.Node.CPUCores >= j.CPUCores
	}},
	{market.ReasonRAM, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return v.Node.RAMMB >= j.RAMMB
	}},
	{market.ReasonWindow, func(j *idlegrid.Job, s *market.Snapshot, v *market.NodeView) bool {
		return !v.AvailableUntil.IsZero() && !v.AvailableUntil.Before(s.Now.Add(time.Duration(j.DurationSeconds)*time.Second))
	}},
	{market.ReasonPrice, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		return v.Node.Ask.FloorMicrosPerGPUHour[j.Tier] <= j.MaxPriceMicrosPerGPUHour
	}},
	{market.ReasonCapacity, func(j *idlegrid.Job, _ *market.Snapshot, v *market.NodeView) bool {
		n := 0
		for _, g := range v.FreeGPUs {
			if allowedModel(j, g) && g.VRAMMB >= j.MinVRAMMB {
				n++
			}
		}
		return n >= j.GPUs
	}},
}

// refDecision is what the reference decides: the best choice of nodes, by
// (all in the preferred region, total score, lowest best node ID), and the
// rejection counts.
type refDecision struct {
	picks      []verdict
	total      float64
	rejections map[market.Reason]int
}

func reference(j *idlegrid.Job, s *market.Snapshot) refDecision {
	d := refDecision{rejections: map[market.Reason]int{}}
	var fits []verdict
	for _, v := range s.Nodes {
		vd := verdict{view: v}
		for _, rl := range rules {
			if !rl.ok(j, s, v) {
				vd.reason = rl.reason
				break
			}
		}
		if vd.reason != "" {
			d.rejections[vd.reason]++
			continue
		}
		vd.floor = v.Node.Ask.FloorMicrosPerGPUHour[j.Tier]
		rel := v.Node.Reliability
		if rel <= 0 {
			rel = 1e-6
		} else if rel > 1 {
			rel = 1
		}
		vd.score = float64(vd.floor) / rel
		vd.pref = j.RegionPreferred && v.Node.Region == j.Region
		fits = append(fits, vd)
	}
	// Enumerate every set of j.Nodes fitting nodes in one region.
	var best []verdict
	bestTotal := math.Inf(1)
	var walk func(start int, set []verdict)
	walk = func(start int, set []verdict) {
		if len(set) == j.Nodes {
			total := 0.0
			for _, v := range set {
				total += v.score
			}
			if best == nil || refBetter(set, total, best, bestTotal) {
				best, bestTotal = slices.Clone(set), total
			}
			return
		}
		for i := start; i < len(fits); i++ {
			if len(set) > 0 && fits[i].view.Node.Region != set[0].view.Node.Region {
				continue
			}
			walk(i+1, append(set, fits[i]))
		}
	}
	walk(0, nil)
	d.picks, d.total = best, bestTotal
	if best == nil && len(fits) > 0 {
		d.rejections[market.ReasonCapacity] += len(fits)
	}
	return d
}

func refBetter(a []verdict, at float64, b []verdict, bt float64) bool {
	if a[0].pref != b[0].pref {
		return a[0].pref
	}
	if at != bt {
		// Totals summed in different orders may differ in the last bit.
		return at < bt && !near(at, bt)
	}
	return minID(a) < minID(b)
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

func minID(set []verdict) string {
	id := set[0].view.Node.ID
	for _, v := range set {
		id = min(id, v.view.Node.ID)
	}
	return id
}

func compare(j *idlegrid.Job, s *market.Snapshot, got market.Decision, want refDecision) error {
	if !mapsEqual(got.Rejections, want.rejections) {
		return fmt.Errorf("rejections = %v, want %v", got.Rejections, want.rejections)
	}
	if got.Placed() != (want.picks != nil) {
		return fmt.Errorf("placed = %v (reason %q), reference placed = %v", got.Placed(), got.Reason, want.picks != nil)
	}
	if !got.Placed() {
		if got.Reason == "" {
			return fmt.Errorf("not placed and no reason")
		}
		return nil
	}
	if len(got.Picks) != j.Nodes {
		return fmt.Errorf("%d picks, want %d", len(got.Picks), j.Nodes)
	}
	total := 0.0
	byID := map[string]verdict{}
	for _, v := range want.picks {
		byID[v.view.Node.ID] = v
	}
	seen := map[string]bool{}
	for _, p := range got.Picks {
		if seen[p.Node.ID] {
			return fmt.Errorf("node %s picked twice", p.Node.ID)
		}
		seen[p.Node.ID] = true
		if p.Node.Region != got.Picks[0].Node.Region {
			return fmt.Errorf("picks span regions %s and %s", got.Picks[0].Node.Region, p.Node.Region)
		}
		total += p.Score
		if err := checkPick(j, s, p); err != nil {
			return err
		}
	}
	if !near(total, want.total) {
		return fmt.Errorf("total score %v, reference %v", total, want.total)
	}
	// Where the best choice is unique up to ties the reference breaks the
	// same way, the winners must be the very same nodes at the same prices.
	if j.Nodes == 1 {
		w := want.picks[0]
		if p := got.Picks[0]; p.Node.ID != w.view.Node.ID || p.PriceMicrosPerGPUHour != w.floor {
			return fmt.Errorf("picked %s at %s, reference %s at %s", p.Node.ID, p.PriceMicrosPerGPUHour, w.view.Node.ID, w.floor)
		}
	}
	for _, p := range got.Picks {
		if w, ok := byID[p.Node.ID]; ok && p.PriceMicrosPerGPUHour != w.floor {
			return fmt.Errorf("node %s priced %s, reference %s", p.Node.ID, p.PriceMicrosPerGPUHour, w.floor)
		}
	}
	return nil
}

// checkPick checks one pick on its own: it passes every rule, pays the ask,
// and its GPUs are free, usable, distinct and the lowest UUIDs that are.
func checkPick(j *idlegrid.Job, s *market.Snapshot, p market.Pick) error {
	var v *market.NodeView
	for _, nv := range s.Nodes {
		if nv.Node.ID == p.Node.ID {
			v = nv
		}
	}
	for _, rl := range rules {
		if !rl.ok(j, s, v) {
			return fmt.Errorf("picked %s, which fails %q", p.Node.ID, rl.reason)
		}
	}
	if want := v.Node.Ask.FloorMicrosPerGPUHour[j.Tier]; p.PriceMicrosPerGPUHour != want {
		return fmt.Errorf("%s priced %s, ask %s", p.Node.ID, p.PriceMicrosPerGPUHour, want)
	}
	var usable []string
	for _, g := range v.FreeGPUs {
		if allowedModel(j, g) && g.VRAMMB >= j.MinVRAMMB {
			usable = append(usable, g.UUID)
		}
	}
	slices.Sort(usable)
	var got []string
	for _, g := range p.GPUs {
		got = append(got, g.UUID)
	}
	if want := usable[:j.GPUs]; !slices.Equal(got, want) {
		return fmt.Errorf("%s gpus %v, want %v", p.Node.ID, got, want)
	}
	return nil
}

func describe(s *market.Snapshot) string {
	var b strings.Builder
	for _, v := range s.Nodes {
		n := v.Node
		fmt.Fprintf(&b, "  %s %s/%s rel=%v ask=%v kinds=%v max=%d cpu=%d ram=%d until=%v\n    gpus=%v\n    free=%v\n",
			n.ID, n.Region, n.Residency, n.Reliability, n.Ask.FloorMicrosPerGPUHour, n.Ask.AllowedKinds,
			n.Ask.MaxJobSeconds, n.CPUCores, n.RAMMB, v.AvailableUntil.Sub(now), n.GPUs, v.FreeGPUs)
	}
	return b.String()
}
