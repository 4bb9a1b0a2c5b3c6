package market_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// TestEngine_scenarios runs the scenario files in testdata/market. Each
// file is a market told as commands, with the engine's answers; run with
// -rewrite to regenerate the answers after a deliberate change. The
// commands:
//
//	config notice=120 min-runtime=300 gold-bar=0.9 transfer=0.01
//	node id=n1 [name=n1 gpus=4 model=H100-80GB vram=81920 extra=RTX4090:24576:2 region=eu-west provider=prov_n1
//	     residency=EU gold=3 silver=2 bronze=1 (or none) rel=1 cpu=32 ram=256000
//	     kinds=(training,eval) max-job=2h cached=(ds1,ds2) open=(-1h..+6h,+8h..+9h)
//	     weekly=mon@08:00-18:00 tz=Europe/Berlin tod=(18:00-22:00x150)]
//	lease id=l1 node=n1 [job=jl1 tier=bronze gpus=1 age=10m limit=2h checkpoint=5m saved=5m]
//	place job=j1 [tier=silver gpus=1 nodes=1 cap=3 dur=1h checkpoint-every=30m models=(A,B) vram=..
//	     region=.. preferred residency=.. weight=1 datasets=(name:GB) kind=training cpu=.. ram=..
//	     resume=20m@n1 (its checkpoint holds 20 minutes of its run, on n1)] [commit [assigned]]
//	     (assigned: its leases are not started yet)
//	start lease=l1        (the lease's agent started it)
//	advance by=2m        (gives the notices due, and stops leases whose notice ended)
//	end lease=l1         (the lease finished)
//	remove-node id=n1
//	checkpoint lease=l1 ago=1m
//	reload               (a new engine loads the nodes and leases, as a server starting)
//	queue job=j1
//	explain job=j1
//	market
//	end-by lease=l1      (by when the lease must end, for a start now: EndBy)
//
// Times print relative to the scenario's start, Monday 2025-03-10 12:00 UTC.
func TestEngine_scenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/market", func(t *testing.T, path string) {
		h := newHarness(market.Config{})
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out, err := h.run(td)
			if err != nil {
				td.Fatalf(t, "%v", err)
			}
			if err := h.e.Verify(); err != nil {
				td.Fatalf(t, "the engine's bookkeeping after %s: %v", td.Cmd, err)
			}
			return out
		})
	})
}

type harness struct {
	e      *market.Engine
	cfg    market.Config
	now    time.Time
	nodes  map[string]*idlegrid.Node
	jobs   map[string]*idlegrid.Job
	leases map[string]*idlegrid.Lease
}

func newHarness(cfg market.Config) *harness {
	h := &harness{
		e: market.NewEngine(cfg), now: now,
		nodes: map[string]*idlegrid.Node{}, jobs: map[string]*idlegrid.Job{}, leases: map[string]*idlegrid.Lease{},
	}
	h.cfg = h.e.Config()
	h.e.Advance(now)
	return h
}

// reload starts a new engine from the harness's nodes and leases, as a
// server does from its store (AddLeases): what the engine learnt from
// Commit alone, its claims and reservations, is gone.
func (h *harness) reload() {
	h.e = market.NewEngine(h.cfg)
	h.e.Advance(h.now)
	for _, id := range slices.Sorted(maps.Keys(h.nodes)) {
		h.e.UpsertNode(h.nodes[id])
	}
	var ls []*idlegrid.Lease
	for _, id := range slices.Sorted(maps.Keys(h.leases)) {
		ls = append(ls, h.leases[id])
	}
	h.e.AddLeases(ls)
}

// args is a command's arguments: key → comma-joined values; "" for a flag.
type args map[string]string

func argsOf(td *datadriven.TestData) args {
	a := args{}
	for _, c := range td.CmdArgs {
		a[c.Key] = strings.Join(c.Vals, ",")
	}
	return a
}

func (a args) str(k, def string) string {
	if v, ok := a[k]; ok {
		return v
	}
	return def
}

func (a args) num(k string, def int) int {
	if v, ok := a[k]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(fmt.Sprintf("%s: %v", k, err))
		}
		return n
	}
	return def
}

func (a args) float(k string, def float64) float64 {
	if v, ok := a[k]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			panic(fmt.Sprintf("%s: %v", k, err))
		}
		return f
	}
	return def
}

func (a args) dur(k string, def time.Duration) time.Duration {
	if v, ok := a[k]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			panic(fmt.Sprintf("%s: %v", k, err))
		}
		return d
	}
	return def
}

func (a args) money(k string, def idlegrid.Micros) idlegrid.Micros {
	if v, ok := a[k]; ok {
		if v == "none" {
			return 0
		}
		m, err := idlegrid.ParseMicros(v)
		if err != nil {
			panic(fmt.Sprintf("%s: %v", k, err))
		}
		return m
	}
	return def
}

func (a args) list(k string) []string {
	if v, ok := a[k]; ok && v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

func (h *harness) run(td *datadriven.TestData) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %v", td.Cmd, r)
		}
	}()
	a := argsOf(td)
	switch td.Cmd {
	case "config":
		h.cfg = market.Config{
			NoticeSeconds:           int64(a.num("notice", 0)),
			MinRuntimeSeconds:       int64(a.num("min-runtime", 0)),
			GoldMinReliability:      a.float("gold-bar", 0),
			GoldMinLevel:            a.num("gold-level", 0),
			TransferCostMicrosPerGB: a.money("transfer", 0),
		}
		*h = *newHarness(h.cfg)
		return "", nil
	case "node":
		return "", h.node(a)
	case "lease":
		return "", h.lease(a)
	case "place":
		return h.place(a), nil
	case "advance":
		return h.advance(a.dur("by", 0)), nil
	case "start":
		id := a.str("lease", "")
		l := h.leases[id]
		if l == nil {
			return "", fmt.Errorf("no lease %s", id)
		}
		started := h.now
		l.State, l.StartedAt = idlegrid.LeaseRunning, &started
		h.e.AddLease(l)
		return "", nil
	case "end":
		id := a.str("lease", "")
		if h.leases[id] == nil {
			return "", fmt.Errorf("no lease %s", id)
		}
		delete(h.leases, id)
		h.e.RemoveLease(id)
		return "", nil
	case "remove-node":
		h.e.RemoveNode(a.str("id", ""))
		delete(h.nodes, a.str("id", ""))
		return "", nil
	case "checkpoint":
		at := h.now.Add(-a.dur("ago", 0))
		if l := h.leases[a.str("lease", "")]; l != nil {
			l.CheckpointAt = &at // as the store keeps it
		}
		h.e.Checkpoint(a.str("lease", ""), at)
		return "", nil
	case "reload":
		h.reload()
		return "", nil
	case "queue":
		h.e.NoteQueued(h.job(a))
		return "", nil
	case "explain":
		return h.explain(h.job(a)), nil
	case "market":
		return h.market(), nil
	case "end-by":
		at, why, ok := h.e.EndBy(a.str("lease", ""))
		if !ok {
			return "nothing follows\n", nil
		}
		return fmt.Sprintf("end by %s: %s\n", h.rel(at), why), nil
	}
	return "", fmt.Errorf("unknown command %q", td.Cmd)
}

func (h *harness) node(a args) error {
	id := a.str("id", "")
	model, vram := a.str("model", "H100-80GB"), a.num("vram", 81920)
	n := &idlegrid.Node{
		ID: id, ProviderID: a.str("provider", "prov_"+id), State: idlegrid.NodeOnline, Reliability: a.float("rel", 1), Level: a.num("level", 0),
		Offer: idlegrid.Offer{
			Name: a.str("name", id), CPUCores: a.num("cpu", 32), RAMMB: a.num("ram", 256000),
			Region: a.str("region", "eu-west"), Residency: a.str("residency", "EU"),
			Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways, TimeZone: a.str("tz", "")},
			Ask: idlegrid.Ask{
				FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{},
				MaxJobSeconds:         int64(a.dur("max-job", 0) / time.Second),
			},
			CachedDatasets: a.list("cached"),
		},
	}
	for i := range a.num("gpus", 4) {
		n.GPUs = append(n.GPUs, idlegrid.GPU{UUID: fmt.Sprintf("%s-gpu-%d", id, i), Model: model, VRAMMB: vram})
	}
	if x := a.str("extra", ""); x != "" {
		parts := strings.Split(x, ":")
		v, _ := strconv.Atoi(parts[1])
		c, _ := strconv.Atoi(parts[2])
		for i := range c {
			n.GPUs = append(n.GPUs, idlegrid.GPU{UUID: fmt.Sprintf("%s-gpu-x%d", id, i), Model: parts[0], VRAMMB: v})
		}
	}
	for tier, def := range map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierGold: 3 * unit, idlegrid.TierSilver: 2 * unit, idlegrid.TierBronze: unit} {
		if p := a.money(string(tier), def); p > 0 {
			n.Ask.FloorMicrosPerGPUHour[tier] = p
		}
	}
	for _, k := range a.list("kinds") {
		n.Ask.AllowedKinds = append(n.Ask.AllowedKinds, idlegrid.WorkloadKind(k))
	}
	for _, w := range a.list("open") {
		from, to, _ := strings.Cut(w, "..")
		f, _ := time.ParseDuration(from)
		u, _ := time.ParseDuration(to)
		n.Schedule.Mode = idlegrid.ScheduleWindows
		n.Schedule.OneOff = append(n.Schedule.OneOff, idlegrid.OneOffWindow{Start: now.Add(f), End: now.Add(u)})
	}
	for _, w := range a.list("weekly") { // mon@08:00-18:00
		days, span, _ := strings.Cut(w, "@")
		from, to, _ := strings.Cut(span, "-")
		n.Schedule.Mode = idlegrid.ScheduleWindows
		n.Schedule.Weekly = append(n.Schedule.Weekly, idlegrid.WeeklyWindow{Days: strings.Split(days, "+"), Start: from, End: to})
	}
	for _, w := range a.list("tod") { // 18:00-22:00x150
		span, pct, _ := strings.Cut(w, "x")
		from, to, _ := strings.Cut(span, "-")
		p, _ := strconv.Atoi(pct)
		n.Ask.TimeOfDay = append(n.Ask.TimeOfDay, idlegrid.PriceWindow{Start: from, End: to, MultiplierPercent: int64(p)})
	}
	if err := n.Offer.Validate(); err != nil {
		return err
	}
	h.nodes[id] = n
	h.e.UpsertNode(n)
	return nil
}

// held returns the GPUs of a node that the harness's leases hold.
func (h *harness) held(nodeID string) map[string]bool {
	out := map[string]bool{}
	for _, l := range h.leases {
		if l.NodeID == nodeID {
			for _, u := range l.GPUUUIDs {
				out[u] = true
			}
		}
	}
	return out
}

func (h *harness) lease(a args) error {
	id, nodeID := a.str("id", ""), a.str("node", "")
	n := h.nodes[nodeID]
	if n == nil {
		return fmt.Errorf("no node %s", nodeID)
	}
	held := h.held(nodeID)
	started := h.now.Add(-a.dur("age", 10*time.Minute))
	l := &idlegrid.Lease{
		ID: id, JobID: a.str("job", "j"+id), NodeID: nodeID, Tier: idlegrid.Tier(a.str("tier", "bronze")),
		LimitSeconds: int64(a.dur("limit", 2*time.Hour) / time.Second), State: idlegrid.LeaseRunning,
		CreatedAt: started, StartedAt: &started, PriceMicrosPerGPUHour: unit,
	}
	uuids := make([]string, 0, len(n.GPUs))
	for _, g := range n.GPUs {
		uuids = append(uuids, g.UUID)
	}
	slices.Sort(uuids)
	for _, u := range uuids {
		if !held[u] && len(l.GPUUUIDs) < a.num("gpus", 1) {
			l.GPUUUIDs = append(l.GPUUUIDs, u)
		}
	}
	if len(l.GPUUUIDs) < a.num("gpus", 1) {
		return fmt.Errorf("node %s has only %d free GPUs", nodeID, len(l.GPUUUIDs))
	}
	if v, ok := a["saved"]; ok { // a checkpoint the store holds for the lease, as its agent reported
		d, _ := time.ParseDuration(v)
		saved := h.now.Add(-d)
		l.CheckpointAt = &saved
	}
	h.leases[id] = l
	h.e.AddLease(l)
	if c, ok := a["checkpoint"]; ok {
		d, _ := time.ParseDuration(c)
		h.e.Checkpoint(id, h.now.Add(-d))
	}
	return nil
}

// job returns the job named by a, made or updated from the other args.
func (h *harness) job(a args) *idlegrid.Job {
	id := a.str("job", "")
	j := h.jobs[id]
	if j == nil {
		j = &idlegrid.Job{ID: id, RenterID: "renter", State: idlegrid.JobQueued, CreatedAt: h.now, JobSpec: idlegrid.JobSpec{
			Kind: idlegrid.KindTraining, Image: "ghcr.io/acme/train:1", GPUs: 1, Nodes: 1, Tier: idlegrid.TierSilver,
			MaxPriceMicrosPerGPUHour: 3 * unit, DurationSeconds: 3600,
		}}
		h.jobs[id] = j
	}
	s := &j.JobSpec
	s.Tier = idlegrid.Tier(a.str("tier", string(s.Tier)))
	s.GPUs = a.num("gpus", s.GPUs)
	s.Nodes = a.num("nodes", s.Nodes)
	s.MaxPriceMicrosPerGPUHour = a.money("cap", s.MaxPriceMicrosPerGPUHour)
	s.DurationSeconds = int64(a.dur("dur", time.Duration(s.DurationSeconds)*time.Second) / time.Second)
	s.CheckpointEverySeconds = int64(a.dur("checkpoint-every", time.Duration(s.CheckpointEverySeconds)*time.Second) / time.Second)
	if v := a.list("models"); v != nil {
		s.GPUModels = v
	}
	s.MinVRAMMB = a.num("vram", s.MinVRAMMB)
	s.Region = a.str("region", s.Region)
	if _, ok := a["preferred"]; ok {
		s.RegionPreferred = true
	}
	s.Residency = a.str("residency", s.Residency)
	s.ReliabilityWeight = a.float("weight", s.ReliabilityWeight)
	s.Kind = idlegrid.WorkloadKind(a.str("kind", string(s.Kind)))
	s.CPUCores = a.num("cpu", s.CPUCores)
	s.RAMMB = a.num("ram", s.RAMMB)
	if v := a.list("avoid"); v != nil {
		s.AvoidProviders = v
	}
	s.MinTrustLevel = a.num("min-level", s.MinTrustLevel)
	if v := a.list("datasets"); v != nil {
		s.Datasets = nil
		for _, d := range v {
			name, gb, _ := strings.Cut(d, ":")
			n, _ := strconv.Atoi(gb)
			s.Datasets = append(s.Datasets, idlegrid.Dataset{Name: name, SizeGB: int64(n)})
		}
	}
	if v, ok := a["resume"]; ok {
		held, node, _ := strings.Cut(v, "@")
		d, _ := time.ParseDuration(held)
		j.ResumeSeconds, j.CheckpointNodeID = int64(d/time.Second), node
	}
	if d := a.dur("deadline", 0); d > 0 { // from the scenario's start, like rel
		at := now.Add(d)
		s.Deadline = &at
	}
	s.Interruptible = s.Tier == idlegrid.TierBronze
	if err := s.Validate(h.now); err != nil {
		panic(err)
	}
	return j
}

func (h *harness) rel(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := t.Sub(now)
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

func (h *harness) place(a args) string {
	j := h.job(a)
	d := h.e.Place(j, h.now)
	var b strings.Builder
	writeDecision(&b, h, d)
	if _, ok := a["commit"]; !ok {
		return b.String()
	}
	h.e.Commit(j, d, h.now)
	switch {
	case d.Placed():
		var ids []string
		for _, p := range d.Picks {
			started := h.now
			l := &idlegrid.Lease{
				ID: j.ID + "@" + p.Node.ID, JobID: j.ID, NodeID: p.Node.ID, Tier: j.Tier, State: idlegrid.LeaseRunning,
				PriceMicrosPerGPUHour: p.PriceMicrosPerGPUHour, LimitSeconds: j.DurationSeconds, CreatedAt: h.now, StartedAt: &started,
			}
			for _, g := range p.GPUs {
				l.GPUUUIDs = append(l.GPUUUIDs, g.UUID)
			}
			if _, ok := a["assigned"]; ok {
				l.State, l.StartedAt = idlegrid.LeaseAssigned, nil
			}
			h.leases[l.ID] = l
			h.e.AddLease(l)
			ids = append(ids, l.ID)
		}
		fmt.Fprintf(&b, "committed: leases %s\n", strings.Join(ids, ", "))
	case len(d.Preemptions) > 0:
		for _, p := range d.Preemptions {
			h.notice(p.LeaseID, h.now, p.NoticeSeconds)
		}
		fmt.Fprintf(&b, "committed: notice given\n")
	case d.Reservation != nil:
		fmt.Fprintf(&b, "committed: reserved\n")
	}
	return b.String()
}

// notice stores a notice in the harness's lease, as the coordinator would,
// and tells the engine.
func (h *harness) notice(leaseID string, at time.Time, secs int64) {
	l := h.leases[leaseID]
	if l == nil {
		panic("notice for unknown lease " + leaseID)
	}
	l.NoticeAt, l.NoticeSeconds = &at, secs
	h.e.AddLease(l)
}

func writeDecision(b *strings.Builder, h *harness, d market.Decision) {
	switch {
	case d.Placed():
		b.WriteString("placed:\n")
		for _, p := range d.Picks {
			var gpus []string
			for _, g := range p.GPUs {
				gpus = append(gpus, g.UUID)
			}
			fmt.Fprintf(b, "  %s %s gpus=%s ask=%s", p.Node.ID, p.Node.Region, strings.Join(gpus, ","), p.AskMicrosPerGPUHour)
			if p.CreditMicrosPerGPUHour > 0 {
				fmt.Fprintf(b, " credit=%s", p.CreditMicrosPerGPUHour)
			}
			fmt.Fprintf(b, " price=%s runner-up=%s", p.PriceMicrosPerGPUHour, orNone(p.RunnerUpNodeID))
			if p.ShadowRunnerUp {
				b.WriteString(" (shadow)")
			}
			if !p.StartBy.IsZero() {
				fmt.Fprintf(b, " start-by=%s", h.rel(p.StartBy))
			}
			fmt.Fprintf(b, "\n    %s\n", p.PriceNote())
		}
	case len(d.Preemptions) > 0:
		b.WriteString("preempt:\n")
		for _, p := range d.Preemptions {
			fmt.Fprintf(b, "  %s on %s: %d GPUs, %ds notice, loses %d GPU-seconds\n", p.LeaseID, p.NodeID, p.GPUs, p.NoticeSeconds, p.LostGPUSeconds)
		}
	}
	if r := d.Reservation; r != nil {
		var parts []string
		for _, n := range r.Nodes {
			parts = append(parts, fmt.Sprintf("%s %d GPUs", n.NodeID, n.GPUs))
		}
		kind := ""
		if r.Preempting {
			kind = " (preempting)"
		}
		fmt.Fprintf(b, "reserve from %s%s: %s\n", h.rel(r.Start), kind, strings.Join(parts, ", "))
	}
	if !d.Placed() {
		fmt.Fprintf(b, "reason: %s\n", d.Reason)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (h *harness) advance(by time.Duration) string {
	h.now = h.now.Add(by)
	var b strings.Builder
	fmt.Fprintf(&b, "now %s\n", h.rel(h.now))
	for _, n := range h.e.Advance(h.now) {
		fmt.Fprintf(&b, "notice %s on %s: stop at %s (%s)\n", n.LeaseID, n.NodeID, h.rel(n.StopAt), n.Reason)
		h.notice(n.LeaseID, n.NoticeAt, n.NoticeSeconds)
		h.leases[n.LeaseID].Reason = n.StopAt.Format(time.RFC3339Nano) // remember the stop time
	}
	for _, id := range slices.Sorted(maps.Keys(h.leases)) {
		l := h.leases[id]
		if l.NoticeAt == nil {
			continue
		}
		stop := l.NoticeAt.Add(time.Duration(l.NoticeSeconds) * time.Second)
		if t, err := time.Parse(time.RFC3339Nano, l.Reason); err == nil {
			stop = t
		}
		if h.now.Before(stop) {
			continue
		}
		fmt.Fprintf(&b, "stopped %s after %s of notice\n", id, h.now.Sub(*l.NoticeAt))
		delete(h.leases, id)
		h.e.RemoveLease(id)
	}
	return b.String()
}

func (h *harness) explain(j *idlegrid.Job) string {
	ex := h.e.Explain(j, h.now)
	var b strings.Builder
	fmt.Fprintf(&b, "nodes %d, fit now %d\n", ex.Nodes, ex.Fits)
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(ex.Rejections)) {
		parts = append(parts, fmt.Sprintf("%s %d", r, ex.Rejections[r]))
	}
	fmt.Fprintf(&b, "rejections: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(&b, "summary: %s\n", ex.Summary)
	b.WriteString("asks to beat:\n")
	for _, q := range ex.CheapestAsks {
		fmt.Fprintf(&b, "  %s %s %s ask=%s rel=%v score=$%.6f blocked=%s\n", q.NodeID, q.Region, q.GPUModel,
			q.AskMicrosPerGPUHour, q.Reliability, q.Score/1e6, orNone(string(q.Blocker)))
	}
	fmt.Fprintf(&b, "estimated start: %s (%s)\n", h.rel(ex.EstimatedStart), ex.EstimateNote)
	for _, a := range ex.Advice {
		fmt.Fprintf(&b, "advice: %s\n", a)
	}
	return b.String()
}

func (h *harness) market() string {
	var b strings.Builder
	for _, s := range h.e.MarketView(h.now) {
		fmt.Fprintf(&b, "%s %s: supply %d, free %d, queued %d jobs / %d GPUs, fill %.0f%%, suggest", s.GPUModel, s.Region,
			s.SupplyGPUs, s.FreeGPUs, s.QueuedJobs, s.QueuedGPUs, 100*s.FillRate)
		for _, t := range idlegrid.Tiers {
			if p, ok := s.SuggestedAsk[t]; ok {
				fmt.Fprintf(&b, " %s %s", t, p)
			}
		}
		b.WriteString("\n")
		for _, p := range s.Prices {
			fmt.Fprintf(&b, "  %s %s %s x%d (%s)\n", h.rel(p.At), p.Tier, p.PriceMicrosPerGPUHour, p.GPUs, p.JobID)
		}
	}
	return b.String()
}
