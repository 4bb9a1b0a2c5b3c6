package market_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// mustEngine returns an engine at now holding the given nodes.
func mustEngine(tb testing.TB, nodes ...*idlegrid.Node) *market.Engine {
	tb.Helper()
	e := market.NewEngine(market.Config{})
	e.Advance(now)
	for _, n := range nodes {
		e.UpsertNode(n)
	}
	if err := e.Verify(); err != nil {
		tb.Fatal(err)
	}
	return e
}

// engineNode is newView's node, always open.
func engineNode(id string) *idlegrid.Node {
	n := newView(id).Node
	n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
	return n
}

func mustLease(id, nodeID string, tier idlegrid.Tier, gpus ...string) *idlegrid.Lease {
	started := now.Add(-time.Hour)
	return &idlegrid.Lease{ID: id, JobID: "j" + id, NodeID: nodeID, Tier: tier, State: idlegrid.LeaseRunning,
		GPUUUIDs: gpus, CreatedAt: started, StartedAt: &started, LimitSeconds: 4 * 3600}
}

func TestNewEngine_defaults(t *testing.T) {
	got := market.NewEngine(market.Config{}).Config()
	want := market.Config{GoldMinReliability: 0.9, NoticeSeconds: 120, MinRuntimeSeconds: 300, TransferCostMicrosPerGB: 10_000}
	if got != want {
		t.Errorf("Config() = %+v, want %+v", got, want)
	}
	cfg := market.Config{GoldMinReliability: 0.5, NoticeSeconds: 30, MinRuntimeSeconds: 1, TransferCostMicrosPerGB: 1}
	if got := market.NewEngine(cfg).Config(); got != cfg {
		t.Errorf("Config() = %+v, want %+v", got, cfg)
	}
}

func TestEngine_Place(t *testing.T) {
	t.Run("no nodes", func(t *testing.T) {
		d := mustEngine(t).Place(newJob(), now)
		if d.Placed() || d.Reason != "no nodes online" {
			t.Errorf("placed %v, reason %q", d.Placed(), d.Reason)
		}
	})
	t.Run("does not change the engine", func(t *testing.T) {
		e := mustEngine(t, engineNode("n1"))
		first := e.Place(newJob(), now)
		second := e.Place(newJob(), now)
		if !first.Placed() || first.Picks[0].GPUs[0] != second.Picks[0].GPUs[0] {
			t.Errorf("placements differ: %+v, %+v", first.Picks, second.Picks)
		}
	})
	t.Run("commit claims the GPUs", func(t *testing.T) {
		n := engineNode("n1")
		n.GPUs = n.GPUs[:1]
		e := mustEngine(t, n)
		j := newJob()
		d := e.Place(j, now)
		e.Commit(j, d, now)
		if got := e.Place(newJob(), now); got.Placed() {
			t.Errorf("placed on a claimed GPU: %+v", got.Picks)
		}
		e.ForgetJob(j.ID) // the store refused the placement after all
		if got := e.Place(newJob(), now); !got.Placed() {
			t.Errorf("not placed after the claim was dropped: %s", got.Reason)
		}
		if err := e.Verify(); err != nil {
			t.Fatal(err)
		}
	})
}

// A pick's GPUs are the node's lowest-UUID free ones, whether they lie
// side by side or not, and stay as they were when the node is upserted
// with other GPUs, or its GPUs are claimed, after: a pick may share the
// engine's record of the node.
func TestEngine_pickGPUs(t *testing.T) {
	e := mustEngine(t, engineNode("n1")) // n1-gpu-0 … n1-gpu-3
	e.AddLease(mustLease("l1", "n1", idlegrid.TierSilver, "n1-gpu-1"))
	uuids := func(gs []idlegrid.GPU) string {
		s := ""
		for _, g := range gs {
			s += g.UUID + " "
		}
		return s
	}
	two := newJob()
	two.GPUs = 2
	apart := e.Place(two, now)
	one := newJob()
	together := e.Place(one, now)
	if got := uuids(apart.Picks[0].GPUs); got != "n1-gpu-0 n1-gpu-2 " {
		t.Fatalf("2 GPUs with gpu-1 held: picked %s", got)
	}
	if got := uuids(together.Picks[0].GPUs); got != "n1-gpu-0 " {
		t.Fatalf("1 GPU: picked %s", got)
	}
	_ = append(together.Picks[0].GPUs, idlegrid.GPU{UUID: "appended"}) // must not write into the engine's record
	e.Commit(one, together, now)
	renamed := engineNode("n1")
	for i := range renamed.GPUs {
		renamed.GPUs[i].UUID = "other-" + renamed.GPUs[i].UUID
	}
	e.UpsertNode(renamed)
	if got := uuids(apart.Picks[0].GPUs) + uuids(together.Picks[0].GPUs); got != "n1-gpu-0 n1-gpu-2 n1-gpu-0 " {
		t.Errorf("after the node changed, the earlier picks read %s", got)
	}
	if got := e.Place(newJob(), now); !got.Placed() || uuids(got.Picks[0].GPUs) != "other-n1-gpu-0 " {
		t.Errorf("after the node changed, a job was placed on %+v", got.Picks)
	}
	if err := e.Verify(); err != nil {
		t.Fatal(err)
	}
	// The lease whose GPU went away holds it again when it comes back; the
	// claim of the job placed before the change is gone with its GPU.
	e.UpsertNode(engineNode("n1"))
	if err := e.Verify(); err != nil {
		t.Fatal(err)
	}
	three := newJob()
	three.GPUs = 3
	if got := e.Place(three, now); !got.Placed() || uuids(got.Picks[0].GPUs) != "n1-gpu-0 n1-gpu-2 n1-gpu-3 " {
		t.Errorf("with gpu-1 back under its lease, 3 GPUs were placed on %+v (%s)", got.Picks, got.Reason)
	}
	e.RemoveLease("l1")
	four := newJob()
	four.GPUs = 4
	if got := e.Place(four, now); !got.Placed() {
		t.Errorf("the lease ended, but 4 GPUs were not placed: %s", got.Reason)
	}
	if err := e.Verify(); err != nil {
		t.Fatal(err)
	}
}

// A lease on GPUs its node does not list (the node's record changed
// since) waits for them, and holds them once an upsert lists them again;
// meanwhile its job's claim on the node is released.
func TestEngine_AddLease_gpusNotListed(t *testing.T) {
	n := engineNode("n1")
	listed := n.GPUs
	n.GPUs = []idlegrid.GPU{{UUID: "n1-gpu-9", Model: "H100-80GB", VRAMMB: 81920}}
	e := mustEngine(t, n)
	j := newJob()
	j.ID = "jl1" // the job of mustLease("l1", …)
	d := e.Place(j, now)
	if !d.Placed() {
		t.Fatalf("not placed: %s", d.Reason)
	}
	e.Commit(j, d, now) // it claims n1-gpu-9
	e.AddLease(mustLease("l1", "n1", idlegrid.TierSilver, "n1-gpu-0", "n1-gpu-1", "n1-gpu-2", "n1-gpu-3"))
	if err := e.Verify(); err != nil {
		t.Fatal(err)
	}
	if d := e.Place(newJob(), now); !d.Placed() {
		t.Errorf("n1-gpu-9 still claimed by a job whose lease went elsewhere: %s", d.Reason)
	}
	back := engineNode("n1")
	back.GPUs = listed
	e.UpsertNode(back)
	if err := e.Verify(); err != nil {
		t.Fatal(err)
	}
	if d := e.Place(newJob(), now); d.Placed() {
		t.Errorf("placed on %+v, though the lease holds every GPU listed again", d.Picks)
	}
	e.RemoveLease("l1")
	if d := e.Place(newJob(), now); !d.Placed() {
		t.Errorf("not placed after the lease ended: %s", d.Reason)
	}
}

func TestEngine_AddLease(t *testing.T) {
	t.Run("before its node", func(t *testing.T) {
		e := mustEngine(t)
		n := engineNode("n1")
		var all []string
		for _, g := range n.GPUs {
			all = append(all, g.UUID)
		}
		e.AddLease(mustLease("l1", "n1", idlegrid.TierSilver, all...))
		e.UpsertNode(n)
		if d := e.Place(newJob(), now); d.Placed() {
			t.Errorf("placed on GPUs a lease holds")
		}
		e.RemoveLease("l1")
		if d := e.Place(newJob(), now); !d.Placed() {
			t.Errorf("not placed once the lease ended: %s", d.Reason)
		}
		if err := e.Verify(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("terminal leases hold nothing", func(t *testing.T) {
		n := engineNode("n1")
		n.GPUs = n.GPUs[:1]
		e := mustEngine(t, n)
		l := mustLease("l1", "n1", idlegrid.TierSilver, n.GPUs[0].UUID)
		l.State = idlegrid.LeaseSucceeded
		e.AddLease(l)
		if d := e.Place(newJob(), now); !d.Placed() {
			t.Errorf("not placed: %s", d.Reason)
		}
	})
	t.Run("through an outage", func(t *testing.T) {
		n := engineNode("n1")
		n.GPUs = n.GPUs[:1]
		e := mustEngine(t, n)
		e.AddLease(mustLease("l1", "n1", idlegrid.TierSilver, n.GPUs[0].UUID))
		off := *n
		off.State = idlegrid.NodeOffline
		e.UpsertNode(&off) // the same as RemoveNode
		e.UpsertNode(n)
		if d := e.Place(newJob(), now); d.Placed() {
			t.Errorf("placed on a GPU the lease still holds")
		}
		if err := e.Verify(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestEngine_RemoveNode_dropsReservation(t *testing.T) {
	n := engineNode("n1")
	var all []string
	for _, g := range n.GPUs {
		all = append(all, g.UUID)
	}
	e := mustEngine(t, n, engineNode("n2"))
	e.AddLease(mustLease("l1", "n2", idlegrid.TierSilver, engineNode("n2").GPUs[0].UUID, engineNode("n2").GPUs[1].UUID,
		engineNode("n2").GPUs[2].UUID, engineNode("n2").GPUs[3].UUID))
	e.AddLease(mustLease("l2", "n1", idlegrid.TierSilver, all...))
	j := newJob()
	j.GPUs = 4
	d := e.Place(j, now)
	if d.Reservation == nil {
		t.Fatalf("no reservation: %s", d.Reason)
	}
	e.Commit(j, d, now)
	e.RemoveNode(d.Reservation.Nodes[0].NodeID)
	if err := e.Verify(); err != nil {
		t.Fatal(err)
	}
	got := e.Place(j, now)
	if got.Reservation == nil || got.Reservation.Nodes[0].NodeID == d.Reservation.Nodes[0].NodeID {
		t.Errorf("reservation after its node left: %+v", got.Reservation)
	}
}

func TestEngine_NextEvent(t *testing.T) {
	n := engineNode("n1")
	n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
		{Start: now.Add(-time.Hour), End: now.Add(90 * time.Minute)},
	}}
	e := mustEngine(t, n)
	if got, want := e.NextEvent(), now.Add(90*time.Minute); !got.Equal(want) {
		t.Errorf("NextEvent() = %v, want the window's end %v", got, want)
	}
	l := mustLease("l1", "n1", idlegrid.TierBronze, n.GPUs[0].UUID)
	e.AddLease(l)
	if got, want := e.NextEvent(), now.Add(88*time.Minute); !got.Equal(want) {
		t.Errorf("NextEvent() = %v, want the lease's notice %v", got, want)
	}
	if got := e.Advance(now.Add(88 * time.Minute)); len(got) != 1 || got[0].LeaseID != "l1" || !got[0].StopAt.Equal(now.Add(90*time.Minute)) {
		t.Errorf("Advance() = %+v, want notice for l1 stopping at the window's end", got)
	}
	if got := e.Advance(now.Add(89 * time.Minute)); len(got) != 0 {
		t.Errorf("second Advance() = %+v, want no repeated notice", got)
	}
}

// A rebuilt engine takes over the one it replaces' clearing prices: the
// coordinator rebuilds from the store every few minutes, and the market
// view's prices over time must survive it.
func TestEngine_TakeMarket(t *testing.T) {
	old := mustEngine(t, engineNode("a"), engineNode("b"))
	j := &idlegrid.Job{ID: "j1", JobSpec: idlegrid.JobSpec{Kind: idlegrid.KindTraining, GPUs: 1, Nodes: 1, Tier: idlegrid.TierSilver,
		MaxPriceMicrosPerGPUHour: 10_000_000, DurationSeconds: 600}}
	d := old.Place(j, now)
	if !d.Placed() {
		t.Fatalf("j1 waits: %s", d.Reason)
	}
	old.Commit(j, d, now)
	fresh := mustEngine(t, engineNode("a"), engineNode("b"))
	prices := func(e *market.Engine) int {
		n := 0
		for _, s := range e.MarketView(now) {
			n += len(s.Prices)
		}
		return n
	}
	if prices(fresh) != 0 {
		t.Fatal("a fresh engine has prices before it took any over")
	}
	fresh.TakeMarket(old)
	if got := prices(fresh); got != 1 {
		t.Fatalf("the rebuilt engine shows %d clearing prices, want the 1 the old one recorded", got)
	}
	fresh.TakeMarket(nil) // nothing to take: nothing changes
	if got := prices(fresh); got != 1 {
		t.Fatalf("after taking nothing, %d prices, want 1", got)
	}
}

// Prices recorded from stored leases join the history as the engine's own
// do, oldest first, and a cell keeps only the latest of them.
func TestEngine_RecordPrice(t *testing.T) {
	e := mustEngine(t, engineNode("a"))
	for i := range 70 {
		e.RecordPrice("RTX4090", "eu-west", market.PricePoint{At: now.Add(time.Duration(i-70) * time.Minute),
			Tier: idlegrid.TierSilver, PriceMicrosPerGPUHour: idlegrid.Micros(1_000_000 + i), GPUs: 1, JobID: fmt.Sprintf("old%d", i)})
	}
	e.RecordPrice("A100", "us-east", market.PricePoint{At: now, Tier: idlegrid.TierGold, PriceMicrosPerGPUHour: 3_000_000, GPUs: 8, JobID: "elsewhere"})
	var cell *market.MarketStat
	for _, s := range e.MarketView(now) {
		switch {
		case s.GPUModel == "RTX4090" && s.Region == "eu-west":
			cell = &s
		case s.GPUModel == "A100":
			if len(s.Prices) != 1 || s.Prices[0].JobID != "elsewhere" || s.Region != "us-east" {
				t.Errorf("A100 in %s: prices %+v, want the one recorded in us-east", s.Region, s.Prices)
			}
		case len(s.Prices) != 0:
			t.Errorf("%s in %s: prices %+v, want none: none was recorded there", s.GPUModel, s.Region, s.Prices)
		}
	}
	if cell == nil {
		t.Fatal("no RTX4090 cell in eu-west")
	}
	if n := len(cell.Prices); n != 64 || cell.Prices[0].JobID != "old6" || cell.Prices[n-1].JobID != "old69" {
		t.Fatalf("%d prices from %s to %s, want the latest 64, old6 to old69", n, cell.Prices[0].JobID, cell.Prices[n-1].JobID)
	}
	if got := cell.SuggestedAsk[idlegrid.TierSilver]; got < 1_000_000 {
		t.Errorf("suggested silver ask %d, want it set from the recorded prices", got)
	}
}

// A job's wait reason counts each node once: one of an avoided provider
// with too few GPUs for the job counts as too few GPUs, not avoided too.
func TestEngine_waitReasonCountsOnce(t *testing.T) {
	small := engineNode("small")
	small.GPUs = small.GPUs[:1]
	big := engineNode("big")
	big.ProviderID = small.ProviderID
	e := mustEngine(t, small, big)
	j := &idlegrid.Job{ID: "j", JobSpec: idlegrid.JobSpec{Kind: idlegrid.KindTraining, GPUs: 2, Nodes: 1, Tier: idlegrid.TierSilver,
		MaxPriceMicrosPerGPUHour: 10_000_000, DurationSeconds: 600, AvoidProviders: []string{small.ProviderID}}}
	d := e.Place(j, now)
	if want := "no node fits: 1 provider avoided, 1 too few GPUs"; d.Placed() || d.Reason != want {
		t.Fatalf("reason %q, want %q", d.Reason, want)
	}
	if x := e.Explain(j, now); x.Rejections[market.ReasonGPUs] != 1 || x.Rejections[market.ReasonAvoided] != 1 {
		t.Errorf("explain counts %v, want 1 too few GPUs and 1 provider avoided", x.Rejections)
	}
}

// TestEngine_NodesFree: on a random market, with claims and leases made
// since its index was built, NodesFree finds the nodes FreeNow counts
// enough free GPUs on, for every count and for a search by model.
func TestEngine_NodesFree(t *testing.T) {
	m := newPlaceMarket(3000)
	e, _, _ := loadedEngine(m)
	e.Advance(now)
	for i, j := range m.jobs[:300] {
		d := e.Place(j, now)
		e.Commit(j, d, now) // claims, and reservations
		if i%2 == 0 {
			for k, p := range d.Picks {
				e.AddLease(placedLease(j, p, i*10+k, now))
			}
		}
	}
	ids := make([]string, len(m.nodes))
	for i, n := range m.nodes {
		ids[i] = n.ID
	}
	free := e.FreeNow(ids, now)
	for _, f := range []idlegrid.NodeFilter{
		{MinFreeGPUs: 1}, {MinFreeGPUs: 2}, {MinFreeGPUs: 4}, {MinFreeGPUs: 8},
		{MinFreeGPUs: 2, GPUModels: []string{"L40S", "RTX4090"}, Regions: []string{"eu-west"}},
	} {
		var want []string
		for _, n := range m.nodes {
			if free[n.ID] >= f.MinFreeGPUs && (f.GPUModels == nil || slices.Contains(f.GPUModels, n.GPUs[0].Model)) &&
				(f.Regions == nil || slices.Contains(f.Regions, n.Region)) {
				want = append(want, n.ID)
			}
		}
		got := e.NodesFree(f, now)
		slices.Sort(got)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("NodesFree(%+v): %d nodes, want %d (%v)", f, len(got), len(want), want[:min(len(want), 5)])
		}
	}
}

// TestEngine_FreeNow: a node's GPUs no lease holds while its window is
// open; none while it is closed; a node the engine does not hold, none.
// NodesFree finds the nodes with enough of them.
func TestEngine_FreeNow(t *testing.T) {
	closed := engineNode("n2")
	closed.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows,
		OneOff: []idlegrid.OneOffWindow{{Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)}}}
	open := engineNode("n1")
	e := mustEngine(t, open, closed)
	e.AddLease(mustLease("l1", "n1", idlegrid.TierSilver, open.GPUs[0].UUID, open.GPUs[2].UUID))
	got := e.FreeNow([]string{"n1", "n2", "nope"}, now)
	if want := map[string]int{"n1": 2, "n2": 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("FreeNow = %v, want %v", got, want)
	}
	n1 := []string{"n1"}
	for _, tc := range []struct {
		f    idlegrid.NodeFilter
		want []string
	}{
		{idlegrid.NodeFilter{MinFreeGPUs: 1}, n1},
		{idlegrid.NodeFilter{MinFreeGPUs: 2}, n1},
		{idlegrid.NodeFilter{MinFreeGPUs: 3}, nil},
		{idlegrid.NodeFilter{MinFreeGPUs: 1, Regions: []string{"us-east", "eu-west"},
			GPUModels: []string{"A100-80GB", "H100-80GB"}, MinVRAMMB: 81920}, n1},
		{idlegrid.NodeFilter{MinFreeGPUs: 1, Regions: []string{"us-east"}}, nil},
		{idlegrid.NodeFilter{MinFreeGPUs: 1, GPUModels: []string{"A100-80GB"}}, nil},
		{idlegrid.NodeFilter{MinFreeGPUs: 1, MinVRAMMB: 81921}, nil},
	} {
		if got := e.NodesFree(tc.f, now); !slices.Equal(got, tc.want) {
			t.Errorf("NodesFree(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
	e.RemoveLease("l1")
	if got := e.NodesFree(idlegrid.NodeFilter{MinFreeGPUs: 3}, now); !slices.Equal(got, []string{"n1"}) {
		t.Errorf("NodesFree(3) after the lease ended = %v, want [n1]", got)
	}
	if got := e.FreeNow([]string{"n1"}, now); got["n1"] != 4 {
		t.Errorf("FreeNow after the lease ended = %v, want n1: 4", got)
	}
	e.Advance(now.Add(90 * time.Minute)) // the coordinator's clock reaches the window
	if got := e.FreeNow([]string{"n2"}, now.Add(90*time.Minute)); got["n2"] != 4 {
		t.Errorf("FreeNow in n2's window = %v, want n2: 4", got)
	}
	got2 := e.NodesFree(idlegrid.NodeFilter{MinFreeGPUs: 4}, now.Add(90*time.Minute))
	slices.Sort(got2)
	if want := []string{"n1", "n2"}; !slices.Equal(got2, want) {
		t.Errorf("NodesFree(4) in n2's window = %v, want %v", got2, want)
	}
}

// A shadow runner-up is the least score at or above the worst winner's,
// ties going to the lowest node ID, also where the shelf's order ranks
// the job's tier but ties fall in another order: here the bronze asks tie
// and the nodes stand in the order of their silver asks, highest ID first.
func TestEngine_Place_shadowTieByID(t *testing.T) {
	var nodes []*idlegrid.Node
	for i := range 6 {
		n := engineNode(fmt.Sprintf("n%d", i))
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{
			idlegrid.TierGold: 20 * unit, idlegrid.TierSilver: idlegrid.Micros(10-i) * unit, idlegrid.TierBronze: unit,
		}
		nodes = append(nodes, n)
	}
	e := mustEngine(t, nodes...)
	for _, n := range nodes[:5] { // all busy but n5
		uuids := make([]string, len(n.GPUs))
		for k, g := range n.GPUs {
			uuids[k] = g.UUID
		}
		e.AddLease(mustLease("l-"+n.ID, n.ID, idlegrid.TierSilver, uuids...))
	}
	j := &idlegrid.Job{ID: "j", JobSpec: idlegrid.JobSpec{Kind: idlegrid.KindTraining, GPUs: 4, Nodes: 1, Tier: idlegrid.TierBronze,
		Interruptible: true, MaxPriceMicrosPerGPUHour: 5 * unit, DurationSeconds: 3600}}
	d := e.Place(j, now)
	if !d.Placed() {
		t.Fatalf("not placed: %s", d.Reason)
	}
	if p := d.Picks[0]; p.Node.ID != "n5" || !p.ShadowRunnerUp || p.RunnerUpNodeID != "n0" {
		t.Errorf("placed on %s priced against %q (shadow %v), want n5 priced against the shadow runner-up n0, the lowest ID of the tie",
			p.Node.ID, p.RunnerUpNodeID, p.ShadowRunnerUp)
	}
}

// A gang's reservation is recorded on all of its nodes or on none: one
// that went offline between the decision and its commit leaves no GPUs
// held back on the others.
func TestEngine_CommitGangReservationNodeGone(t *testing.T) {
	e := mustEngine(t, engineNode("n1"), engineNode("n2"))
	for i, id := range []string{"n1", "n2"} {
		e.AddLease(mustLease(fmt.Sprintf("l%d", i), id, idlegrid.TierSilver, id+"-gpu-0", id+"-gpu-1", id+"-gpu-2", id+"-gpu-3"))
	}
	j := newJob()
	j.Nodes, j.GPUs = 2, 4
	d := e.Place(j, now)
	if d.Reservation == nil || len(d.Reservation.Nodes) != 2 {
		t.Fatalf("want a reservation on both nodes; got %+v (%s)", d.Reservation, d.Reason)
	}
	gone := d.Reservation.Nodes[1].NodeID
	kept := d.Reservation.Nodes[0].NodeID
	e.RemoveNode(gone)
	e.Commit(j, d, now)
	if got := e.DebugRes(kept); got != "none" {
		t.Errorf("node %s keeps a reservation for a gang whose node %s went offline: %s", kept, gone, got)
	}
	if err := e.Verify(); err != nil {
		t.Fatal(err)
	}
	e.UpsertNode(engineNode(gone)) // back: the job plans anew
	e.Commit(j, e.Place(j, now), now)
	for _, id := range []string{"n1", "n2"} {
		if got := e.DebugRes(id); !strings.HasPrefix(got, j.ID) {
			t.Errorf("after its node came back, %s's reservation = %s, want the job's", id, got)
		}
	}
}
