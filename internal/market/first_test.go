package market_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

var now = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

const unit = idlegrid.MicrosPerUnit

// newView returns an online node offering four free H100s in eu-west, with
// asks of $3 gold, $2 silver and $1 bronze, fully reliable, for a day.
func newView(id string) *market.NodeView {
	gpus := []idlegrid.GPU{
		{UUID: id + "-gpu-3", Model: "H100-80GB", VRAMMB: 81920},
		{UUID: id + "-gpu-1", Model: "H100-80GB", VRAMMB: 81920},
		{UUID: id + "-gpu-2", Model: "H100-80GB", VRAMMB: 81920},
		{UUID: id + "-gpu-0", Model: "H100-80GB", VRAMMB: 81920},
	}
	return &market.NodeView{
		Node: &idlegrid.Node{
			ID:         id,
			ProviderID: "prov_" + id,
			Offer: idlegrid.Offer{
				Name:      id,
				GPUs:      gpus,
				CPUCores:  32,
				RAMMB:     256000,
				Region:    "eu-west",
				Residency: "EU",
				Ask: idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{
					idlegrid.TierGold: 3 * unit, idlegrid.TierSilver: 2 * unit, idlegrid.TierBronze: 1 * unit,
				}},
			},
			State:       idlegrid.NodeOnline,
			Reliability: 1,
		},
		FreeGPUs:       slices.Clone(gpus),
		AvailableUntil: now.Add(24 * time.Hour),
	}
}

// newJob returns a queued silver job for one H100-class GPU for an hour,
// capped at $3/GPU-h.
func newJob() *idlegrid.Job {
	return &idlegrid.Job{
		ID:       "job_1",
		RenterID: "renter_1",
		JobSpec: idlegrid.JobSpec{
			Kind:                     idlegrid.KindTraining,
			Image:                    "ghcr.io/acme/trainer:1",
			GPUs:                     1,
			Nodes:                    1,
			Tier:                     idlegrid.TierSilver,
			MaxPriceMicrosPerGPUHour: 3 * unit,
			DurationSeconds:          3600,
		},
		State: idlegrid.JobQueued,
	}
}

func snapshot(views ...*market.NodeView) *market.Snapshot {
	return &market.Snapshot{Now: now, Nodes: views}
}

func pickIDs(d market.Decision) []string {
	var ids []string
	for _, p := range d.Picks {
		ids = append(ids, p.Node.ID)
	}
	return ids
}

func TestFirstMatcher_Place_constraints(t *testing.T) {
	tests := []struct {
		name string
		node func(v *market.NodeView)
		job  func(j *idlegrid.Job)
		want market.Reason // "" means placed
	}{
		{name: "fits"},
		{
			name: "tier not in ask",
			node: func(v *market.NodeView) { delete(v.Node.Ask.FloorMicrosPerGPUHour, idlegrid.TierSilver) },
			want: market.ReasonTier,
		},
		{
			name: "tier priced zero",
			node: func(v *market.NodeView) { v.Node.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 0 },
			want: market.ReasonTier,
		},
		{
			name: "kind refused",
			node: func(v *market.NodeView) { v.Node.Ask.AllowedKinds = []idlegrid.WorkloadKind{idlegrid.KindInference} },
			want: market.ReasonKind,
		},
		{
			name: "kind allowed",
			node: func(v *market.NodeView) {
				v.Node.Ask.AllowedKinds = []idlegrid.WorkloadKind{idlegrid.KindInference, idlegrid.KindTraining}
			},
		},
		{
			name: "longer than node allows",
			node: func(v *market.NodeView) { v.Node.Ask.MaxJobSeconds = 3599 },
			want: market.ReasonMaxDuration,
		},
		{
			name: "exactly as long as node allows",
			node: func(v *market.NodeView) { v.Node.Ask.MaxJobSeconds = 3600 },
		},
		{
			name: "region required",
			job:  func(j *idlegrid.Job) { j.Region = "us-east" },
			want: market.ReasonRegion,
		},
		{
			name: "region preferred elsewhere still fits",
			job:  func(j *idlegrid.Job) { j.Region, j.RegionPreferred = "us-east", true },
		},
		{
			name: "region matches",
			job:  func(j *idlegrid.Job) { j.Region = "eu-west" },
		},
		{
			name: "residency differs",
			job:  func(j *idlegrid.Job) { j.Residency = "US" },
			want: market.ReasonResidency,
		},
		{
			name: "residency matches ignoring case",
			job:  func(j *idlegrid.Job) { j.Residency = "eu" },
		},
		{
			name: "gpu model not offered",
			job:  func(j *idlegrid.Job) { j.GPUModels = []string{"A100-40GB", "RTX4090"} },
			want: market.ReasonGPUModel,
		},
		{
			name: "gpu model matches ignoring case",
			job:  func(j *idlegrid.Job) { j.GPUModels = []string{"RTX4090", "h100-80gb"} },
		},
		{
			name: "model checked before vram",
			job:  func(j *idlegrid.Job) { j.GPUModels, j.MinVRAMMB = []string{"A100-40GB"}, 1<<30 },
			want: market.ReasonGPUModel,
		},
		{
			name: "vram too small",
			job:  func(j *idlegrid.Job) { j.MinVRAMMB = 81921 },
			want: market.ReasonVRAM,
		},
		{
			name: "vram exactly enough",
			job:  func(j *idlegrid.Job) { j.MinVRAMMB = 81920 },
		},
		{
			name: "vram judged on allowed models only",
			node: func(v *market.NodeView) {
				v.Node.GPUs[0] = idlegrid.GPU{UUID: "small", Model: "A100-40GB", VRAMMB: 40960}
			},
			job:  func(j *idlegrid.Job) { j.GPUModels, j.MinVRAMMB = []string{"A100-40GB"}, 50000 },
			want: market.ReasonVRAM,
		},
		{
			name: "vram judged on all gpus, busy ones too",
			node: func(v *market.NodeView) { v.FreeGPUs = nil },
			job:  func(j *idlegrid.Job) { j.MinVRAMMB = 90000 },
			want: market.ReasonVRAM,
		},
		{
			name: "cpu short",
			job:  func(j *idlegrid.Job) { j.CPUCores = 33 },
			want: market.ReasonCPU,
		},
		{
			name: "cpu exactly enough",
			job:  func(j *idlegrid.Job) { j.CPUCores = 32 },
		},
		{
			name: "cpu not asked on a node that reports none",
			node: func(v *market.NodeView) { v.Node.CPUCores, v.Node.RAMMB = 0, 0 },
		},
		{
			name: "ram short",
			job:  func(j *idlegrid.Job) { j.RAMMB = 256001 },
			want: market.ReasonRAM,
		},
		{
			name: "window too short",
			node: func(v *market.NodeView) { v.AvailableUntil = now.Add(3599 * time.Second) },
			want: market.ReasonWindow,
		},
		{
			name: "window exactly long enough",
			node: func(v *market.NodeView) { v.AvailableUntil = now.Add(3600 * time.Second) },
		},
		{
			name: "not offered now",
			node: func(v *market.NodeView) { v.AvailableUntil = time.Time{} },
			want: market.ReasonWindow,
		},
		{
			name: "window ended",
			node: func(v *market.NodeView) { v.AvailableUntil = now.Add(-time.Hour) },
			want: market.ReasonWindow,
		},
		{
			name: "cap below ask",
			job:  func(j *idlegrid.Job) { j.MaxPriceMicrosPerGPUHour = 2*unit - 1 },
			want: market.ReasonPrice,
		},
		{
			name: "cap equal to ask",
			job:  func(j *idlegrid.Job) { j.MaxPriceMicrosPerGPUHour = 2 * unit },
		},
		{
			name: "cap judged against the job's tier",
			job: func(j *idlegrid.Job) {
				j.Tier, j.Interruptible, j.MaxPriceMicrosPerGPUHour = idlegrid.TierGold, false, 2*unit
			},
			want: market.ReasonPrice,
		},
		{
			name: "all gpus busy",
			node: func(v *market.NodeView) { v.FreeGPUs = nil },
			want: market.ReasonCapacity,
		},
		{
			name: "too few free",
			node: func(v *market.NodeView) { v.FreeGPUs = v.FreeGPUs[:2] },
			job:  func(j *idlegrid.Job) { j.GPUs = 3 },
			want: market.ReasonCapacity,
		},
		{
			name: "free gpus of the wrong model do not count",
			node: func(v *market.NodeView) {
				v.Node.GPUs[0] = idlegrid.GPU{UUID: "a100", Model: "A100-80GB", VRAMMB: 81920}
				v.FreeGPUs = []idlegrid.GPU{v.Node.GPUs[0], v.Node.GPUs[1]}
			},
			job:  func(j *idlegrid.Job) { j.GPUs, j.GPUModels = 2, []string{"H100-80GB"} },
			want: market.ReasonCapacity,
		},
		{
			name: "first failing check counts: tier before price",
			node: func(v *market.NodeView) { delete(v.Node.Ask.FloorMicrosPerGPUHour, idlegrid.TierSilver) },
			job:  func(j *idlegrid.Job) { j.MaxPriceMicrosPerGPUHour = 1 },
			want: market.ReasonTier,
		},
		{
			name: "first failing check counts: residency before window",
			node: func(v *market.NodeView) { v.AvailableUntil = time.Time{} },
			job:  func(j *idlegrid.Job) { j.Residency = "US" },
			want: market.ReasonResidency,
		},
		{
			name: "first failing check counts: window before price before capacity",
			node: func(v *market.NodeView) { v.AvailableUntil, v.FreeGPUs = now.Add(time.Minute), nil },
			job:  func(j *idlegrid.Job) { j.MaxPriceMicrosPerGPUHour = 1 },
			want: market.ReasonWindow,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, j := newView("node_a"), newJob()
			if tt.node != nil {
				tt.node(v)
			}
			if tt.job != nil {
				tt.job(j)
			}
			d := market.NewFirstMatcher().Place(j, snapshot(v))
			if tt.want == "" {
				if !d.Placed() {
					t.Fatalf("not placed: %s", d.Reason)
				} else if got := len(d.Picks[0].GPUs); got != j.GPUs {
					t.Fatalf("got %d GPUs, want %d", got, j.GPUs)
				}
				return
			}
			if d.Placed() {
				t.Fatalf("placed on %v, want rejected for %q", pickIDs(d), tt.want)
			}
			if got, want := d.Rejections, map[market.Reason]int{tt.want: 1}; !mapsEqual(got, want) {
				t.Errorf("rejections = %v, want %v", got, want)
			}
			if got, want := d.Reason, "no node fits: 1 "+string(tt.want); got != want {
				t.Errorf("reason = %q, want %q", got, want)
			}
		})
	}
}

func mapsEqual(a, b map[market.Reason]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestFirstMatcher_Place_reason(t *testing.T) {
	t.Run("no nodes", func(t *testing.T) {
		for _, s := range []*market.Snapshot{nil, snapshot()} {
			d := market.NewFirstMatcher().Place(newJob(), s)
			if got, want := d.Reason, "no nodes online"; got != want || d.Placed() {
				t.Errorf("reason = %q (placed %v), want %q", got, d.Placed(), want)
			}
		}
	})
	t.Run("most common first, ties in check order", func(t *testing.T) {
		var views []*market.NodeView
		add := func(n int, f func(v *market.NodeView)) {
			for range n {
				v := newView(fmt.Sprintf("node_%02d", len(views)))
				f(v)
				views = append(views, v)
			}
		}
		add(2, func(v *market.NodeView) { v.AvailableUntil = time.Time{} })
		add(3, func(v *market.NodeView) { v.Node.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 5 * unit })
		add(5, func(v *market.NodeView) { v.Node.GPUs = []idlegrid.GPU{{UUID: "x", Model: "RTX4090", VRAMMB: 24576}} })
		add(2, func(v *market.NodeView) { v.Node.Region = "us-east" })
		add(1, func(v *market.NodeView) { v.FreeGPUs = nil })
		j := newJob()
		j.Region = "eu-west"
		j.GPUModels = []string{"H100-80GB"}
		d := market.NewFirstMatcher().Place(j, snapshot(views...))
		want := "no node fits: 5 gpu model, 3 cap below ask, 2 region, 2 window too short, 1 no free capacity"
		if d.Reason != want {
			t.Errorf("reason = %q\nwant     %q", d.Reason, want)
		}
		wantCounts := map[market.Reason]int{
			market.ReasonGPUModel: 5, market.ReasonPrice: 3, market.ReasonRegion: 2,
			market.ReasonWindow: 2, market.ReasonCapacity: 1,
		}
		if !mapsEqual(d.Rejections, wantCounts) {
			t.Errorf("rejections = %v, want %v", d.Rejections, wantCounts)
		}
	})
	t.Run("placed decisions keep the rejections and no reason", func(t *testing.T) {
		bad := newView("node_b")
		bad.AvailableUntil = time.Time{}
		d := market.NewFirstMatcher().Place(newJob(), snapshot(bad, newView("node_a")))
		if !d.Placed() || d.Reason != "" {
			t.Fatalf("placed = %v, reason = %q", d.Placed(), d.Reason)
		}
		if got := d.Rejections[market.ReasonWindow]; got != 1 {
			t.Errorf("window rejections = %d, want 1", got)
		}
	})
}

// withAsk sets a view's silver ask and reliability.
func withAsk(v *market.NodeView, silver idlegrid.Micros, reliability float64) *market.NodeView {
	v.Node.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = silver
	v.Node.Reliability = reliability
	return v
}

func TestFirstMatcher_Place_ranking(t *testing.T) {
	tests := []struct {
		name  string
		views []*market.NodeView
		job   func(j *idlegrid.Job)
		want  string
		price idlegrid.Micros
	}{
		{
			name: "cheaper wins at equal reliability",
			views: []*market.NodeView{
				withAsk(newView("node_a"), 2*unit, 0.9),
				withAsk(newView("node_b"), 1500000, 0.9),
			},
			want: "node_b", price: 1500000,
		},
		{
			name: "reliable beats cheaper but flaky",
			views: []*market.NodeView{
				withAsk(newView("node_cheap"), 1500000, 0.5), // scores 3,000,000
				withAsk(newView("node_solid"), 2*unit, 1.0),  // scores 2,000,000
			},
			want: "node_solid", price: 2 * unit,
		},
		{
			name: "zero reliability ranks last, not first",
			views: []*market.NodeView{
				withAsk(newView("node_a"), 1*unit, 0),
				withAsk(newView("node_b"), 2*unit, 0.1),
			},
			want: "node_b", price: 2 * unit,
		},
		{
			name: "negative reliability ranks last",
			views: []*market.NodeView{
				withAsk(newView("node_a"), 1*unit, -3),
				withAsk(newView("node_b"), 2*unit, 0.1),
			},
			want: "node_b", price: 2 * unit,
		},
		{
			name: "reliability above one counts as one",
			views: []*market.NodeView{
				withAsk(newView("node_a"), 2*unit, 5),
				withAsk(newView("node_b"), 1900000, 1),
			},
			want: "node_b", price: 1900000,
		},
		{
			name: "ties go to the lower node ID",
			views: []*market.NodeView{
				withAsk(newView("node_c"), 2*unit, 1),
				withAsk(newView("node_a"), 2*unit, 1),
				withAsk(newView("node_b"), 2*unit, 1),
			},
			want: "node_a", price: 2 * unit,
		},
		{
			name: "preferred region ranks first whatever the price",
			views: []*market.NodeView{
				withAsk(newView("node_eu"), 1*unit, 1),
				func() *market.NodeView {
					v := withAsk(newView("node_us"), 3*unit, 0.5)
					v.Node.Region = "us-east"
					return v
				}(),
			},
			job:  func(j *idlegrid.Job) { j.Region, j.RegionPreferred = "us-east", true },
			want: "node_us", price: 3 * unit,
		},
		{
			name: "preferred region empty: others serve",
			views: []*market.NodeView{
				withAsk(newView("node_b"), 2*unit, 1),
				withAsk(newView("node_a"), 1*unit, 1),
			},
			job:  func(j *idlegrid.Job) { j.Region, j.RegionPreferred = "us-east", true },
			want: "node_a", price: 1 * unit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob()
			if tt.job != nil {
				tt.job(j)
			}
			d := market.NewFirstMatcher().Place(j, snapshot(tt.views...))
			if !d.Placed() {
				t.Fatalf("not placed: %s", d.Reason)
			}
			p := d.Picks[0]
			if got := p.Node.ID; got != tt.want {
				t.Errorf("node = %s, want %s", got, tt.want)
			}
			if got := p.PriceMicrosPerGPUHour; got != tt.price {
				t.Errorf("price = %s, want %s", got, tt.price)
			}
			if got, want := p.Score, market.Score(p.PriceMicrosPerGPUHour, p.Node.Reliability); got != want {
				t.Errorf("score = %v, want %v", got, want)
			}
		})
	}
}

func TestScore(t *testing.T) {
	tests := []struct {
		floor       idlegrid.Micros
		reliability float64
		want        float64
	}{
		{2 * unit, 1, 2e6},
		{2 * unit, 0.5, 4e6},
		{2 * unit, 7, 2e6},
		{1, 0, 1e6},
		{1, -1, 1e6},
	}
	for _, tt := range tests {
		if got := market.Score(tt.floor, tt.reliability); got != tt.want {
			t.Errorf("Score(%d, %v) = %v, want %v", tt.floor, tt.reliability, got, tt.want)
		}
	}
}

func TestFirstMatcher_Place_pick(t *testing.T) {
	v := newView("node_a")
	v.Node.GPUs = append(v.Node.GPUs, idlegrid.GPU{UUID: "node_a-gpu-00", Model: "RTX4090", VRAMMB: 24576})
	v.FreeGPUs = []idlegrid.GPU{v.Node.GPUs[4], v.Node.GPUs[0], v.Node.GPUs[2], v.Node.GPUs[3]} // gpu-1 busy
	j := newJob()
	j.GPUs = 2
	j.GPUModels = []string{"H100-80GB"}
	j.MaxPriceMicrosPerGPUHour = 2500000
	d := market.NewFirstMatcher().Place(j, snapshot(v))
	if !d.Placed() {
		t.Fatalf("not placed: %s", d.Reason)
	}
	p := d.Picks[0]
	var uuids []string
	for _, g := range p.GPUs {
		uuids = append(uuids, g.UUID)
	}
	if want := []string{"node_a-gpu-0", "node_a-gpu-2"}; !slices.Equal(uuids, want) {
		t.Errorf("gpus = %v, want %v", uuids, want)
	}
	if got, want := p.PriceNote(), "ask $2.000000/GPU-h (first matcher pays the ask; cap $2.500000)"; got != want {
		t.Errorf("price note = %q, want %q", got, want)
	}
	if got, want := len(d.Rejections), 0; got != want {
		t.Errorf("rejections = %v, want none", d.Rejections)
	}
}

func TestFirstMatcher_Place_multiNode(t *testing.T) {
	// eu-west: three nodes scoring 1, 2, 3 (units). us-east: two scoring 1.2, 1.3.
	eu := []*market.NodeView{
		withAsk(newView("eu_1"), 1*unit, 1),
		withAsk(newView("eu_2"), 2*unit, 1),
		withAsk(newView("eu_3"), 3*unit, 1),
	}
	us := []*market.NodeView{
		withAsk(newView("us_1"), 1200000, 1),
		withAsk(newView("us_2"), 1300000, 1),
	}
	for _, v := range us {
		v.Node.Region = "us-east"
	}
	views := append(slices.Clone(eu), us...)
	tests := []struct {
		name   string
		nodes  int
		job    func(j *idlegrid.Job)
		want   []string
		reason string
	}{
		{name: "one node: the single best", nodes: 1, want: []string{"eu_1"}},
		{name: "two nodes: the region with the lowest total", nodes: 2, want: []string{"us_1", "us_2"}},
		{name: "three nodes: the only region that has three", nodes: 3, want: []string{"eu_1", "eu_2", "eu_3"}},
		{
			name: "preferred region first when it can hold the job", nodes: 2,
			job:  func(j *idlegrid.Job) { j.Region, j.RegionPreferred = "eu-west", true },
			want: []string{"eu_1", "eu_2"},
		},
		{
			name: "preferred region too small: best other region", nodes: 3,
			job:  func(j *idlegrid.Job) { j.Region, j.RegionPreferred = "us-east", true },
			want: []string{"eu_1", "eu_2", "eu_3"},
		},
		{
			name: "required region", nodes: 2,
			job:  func(j *idlegrid.Job) { j.Region = "eu-west" },
			want: []string{"eu_1", "eu_2"},
		},
		{
			name: "too many for any region", nodes: 4,
			reason: "needs 4 nodes in one region, at most 3 fit in one region",
		},
		{
			name: "too many, with other rejections", nodes: 3,
			job:    func(j *idlegrid.Job) { j.MaxPriceMicrosPerGPUHour = 2 * unit },
			reason: "needs 3 nodes in one region, at most 2 fit in one region (other nodes: 1 cap below ask)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob()
			j.Nodes = tt.nodes
			if tt.job != nil {
				tt.job(j)
			}
			d := market.NewFirstMatcher().Place(j, snapshot(views...))
			if got := pickIDs(d); !slices.Equal(got, tt.want) {
				t.Errorf("picks = %v, want %v (reason %q)", got, tt.want, d.Reason)
			}
			if d.Reason != tt.reason {
				t.Errorf("reason = %q, want %q", d.Reason, tt.reason)
			}
			if !d.Placed() {
				sum := 0
				for _, n := range d.Rejections {
					sum += n
				}
				if sum != len(views) {
					t.Errorf("rejections %v count %d nodes, want %d", d.Rejections, sum, len(views))
				}
			}
		})
	}
}

func TestFirstMatcher_Place_multiNodeDistinct(t *testing.T) {
	// One node repeated in the snapshot must not fill two places.
	a := newView("node_a")
	d := market.NewFirstMatcher().Place(func() *idlegrid.Job {
		j := newJob()
		j.Nodes = 2
		return j
	}(), snapshot(a, a))
	if d.Placed() {
		t.Fatalf("placed on %v, want one node only", pickIDs(d))
	}
}

func TestSnapshot_Claim(t *testing.T) {
	v := newView("node_a")
	orig := slices.Clone(v.FreeGPUs)
	backing := v.FreeGPUs
	s := snapshot(newView("node_b"), v)
	s.Nodes[0].Node.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 2500000 // node_a first
	m := market.NewFirstMatcher()
	j := newJob()
	j.GPUs = 2

	seen := map[string]bool{}
	var order []string
	for range 4 {
		d := m.Place(j, s)
		if !d.Placed() {
			t.Fatalf("not placed after %v: %s", order, d.Reason)
		}
		for _, p := range d.Picks {
			for _, g := range p.GPUs {
				if seen[g.UUID] {
					t.Fatalf("gpu %s assigned twice", g.UUID)
				}
				seen[g.UUID] = true
			}
			order = append(order, p.Node.ID)
			s.Claim(p)
		}
	}
	if want := []string{"node_a", "node_a", "node_b", "node_b"}; !slices.Equal(order, want) {
		t.Errorf("placed on %v, want %v", order, want)
	}
	d := m.Place(j, s)
	if got, want := d.Reason, "no node fits: 2 no free capacity"; got != want {
		t.Errorf("reason = %q, want %q", got, want)
	}
	if !slices.Equal(backing, orig) {
		t.Errorf("Claim changed the caller's slice: %v", backing)
	}

	t.Run("unknown node", func(t *testing.T) {
		s := snapshot(newView("node_a"))
		s.Claim(market.Pick{Node: &idlegrid.Node{ID: "node_x"}, GPUs: []idlegrid.GPU{{UUID: "node_a-gpu-0"}}})
		s.Claim(market.Pick{})
		if got := len(s.Nodes[0].FreeGPUs); got != 4 {
			t.Errorf("free = %d, want 4", got)
		}
	})
}
