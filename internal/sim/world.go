package sim

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/trace"
)

// world is what every run of a simulation replays: the nodes with their
// windows, asks and true reliability, and the jobs, all in unix seconds.
// It is built once from the traces and never changes.
type world struct {
	cfg        Config
	start, end int64 // the replay span [start, end)
	// spanOfDemand: the supply has no windows, so the demand's own submit
	// times set the span, and nothing moves the demand onto it.
	spanOfDemand bool

	nodes     []*simNode
	jobs      []jobSpec // by submit time
	jobIDs    []string  // the trace's name of each source job
	modelSets [][]string
	regions   []string // regions[0] is "" (any)

	opens       []int64 // every window start, sorted
	offered     int64   // GPU-seconds offered within the span
	offeredBins []int64 // GPU-seconds offered in each sample bin
	binSeconds  int64

	onDemand, market map[string]idlegrid.Micros
	refs             map[uint16]idlegrid.Micros // reference on-demand price per model set
	proxied          []string                   // models priced by proxy: the tables do not know them
	notes            []string                   // what the build did, for the report
	demandReport     trace.Report
	supplyReport     trace.Report
	pricesReport     trace.Report
}

// span is a window of a node, [start, end) in unix seconds.
type span struct{ start, end int64 }

// simNode is one node of the world.
type simNode struct {
	idx       int32
	id        string
	model     string
	vramMB    int
	gpus      int
	region    string
	residency string
	windows   []span
	asks      []idlegrid.Micros // per window, when the trace gave them; nil: ask for all
	ask       idlegrid.Micros   // the silver floor per GPU-hour
	rel       float64           // the true share of leases it completes
	// history is the record it brings into the replay.
	histCompleted, histFailed int64
	watched                   bool // the estimator's own node
}

// askAt is the silver floor of window i.
func (n *simNode) askAt(i int) idlegrid.Micros {
	if n.asks != nil && i < len(n.asks) {
		return n.asks[i]
	}
	return n.ask
}

// floorOf is the floor for tier t of a node asking ask (its silver
// floor): bronze 60% of it, gold 125%.
func floorOf(ask idlegrid.Micros, t idlegrid.Tier) idlegrid.Micros {
	switch t {
	case idlegrid.TierGold:
		return ask * goldPercent / 100
	case idlegrid.TierBronze:
		return ask * bronzePercent / 100
	}
	return ask
}

// Tier floors and caps, as percentages.
const (
	goldPercent   = 125 // gold floor: 125% of the silver ask
	bronzePercent = 60  // bronze floor: 60% of the silver ask

	goldCapPercent   = 100 // a gold renter pays up to the on-demand price
	silverCapPercent = 80
	bronzeCapPercent = 50

	proxyMarketPercent = 40 // a model no marketplace lists rents for 40% of on-demand
)

func capPercent(t idlegrid.Tier) int64 {
	switch t {
	case idlegrid.TierGold:
		return goldCapPercent
	case idlegrid.TierBronze:
		return bronzeCapPercent
	}
	return silverCapPercent
}

// jobSpec is one job of the world, compact: a million of them fit in
// 48 MB.
type jobSpec struct {
	submit int64
	cap    idlegrid.Micros
	dur    int32 // seconds
	ckpt   int32 // seconds between checkpoints; 0: it never saves its work
	src    int32 // index into world.jobIDs
	copy   int32 // 0: the trace's own job; k: its k-th copy
	models uint16
	region uint16
	gpus   int8
	tier   int8 // tier rank: gold 0, silver 1, bronze 2
	probe  bool // a job the estimator added
}

func (j *jobSpec) tierOf() idlegrid.Tier { return idlegrid.Tiers[j.tier] }

// buildWorld turns the traces into a world.
func buildWorld(cfg Config) (*world, error) {
	w := &world{cfg: cfg, onDemand: map[string]idlegrid.Micros{}, market: map[string]idlegrid.Micros{}, regions: []string{""}}
	w.modelSets = [][]string{nil}
	if cfg.Demand == nil || cfg.Supply == nil || cfg.Prices == nil {
		return nil, fmt.Errorf("sim: a simulation needs demand, supply and prices")
	}
	w.demandReport, w.supplyReport, w.pricesReport = cfg.Demand.Report, cfg.Supply.Report, cfg.Prices.Report
	if err := w.setSpan(); err != nil {
		return nil, err
	}
	nodeRNG := rand.New(rand.NewPCG(cfg.Seed, 0x6e6f646573)) // "nodes"
	jobRNG := rand.New(rand.NewPCG(cfg.Seed, 0x6a6f6273))    // "jobs"
	w.buildNodes(nodeRNG)
	if err := w.checkNodeIDs(); err != nil {
		return nil, err
	}
	if err := checkProbes(cfg.Probes); err != nil {
		return nil, err
	}
	w.setPrices()
	w.priceNodes(nodeRNG)
	if err := w.buildJobs(jobRNG); err != nil {
		return nil, err
	}
	if len(w.nodes) == 0 {
		return nil, idlegrid.Invalid("supply", "no node offers GPUs within the replay span")
	}
	w.index()
	return w, nil
}

// setSpan decides the replay span: the supply's windows, or for supply
// without windows (the Alibaba node list) the demand's submit times;
// truncated to Config.Span.
func (w *world) setSpan() error {
	s, e := w.cfg.Supply.Span()
	if s.IsZero() {
		jobs := w.cfg.Demand.Jobs
		if len(jobs) == 0 {
			return idlegrid.Invalid("demand", "no jobs, and the supply has no windows: nothing sets the replay span")
		}
		s, e = jobs[0].Submit, jobs[len(jobs)-1].Submit.Add(time.Second)
		w.spanOfDemand = true
		w.notef("the supply has no windows: its nodes are offered around the clock, over the demand's span")
	}
	w.start, w.end = s.Unix(), e.Unix()
	if d := int64(w.cfg.Span / time.Second); d > 0 && w.start+d < w.end {
		w.end = w.start + d
		w.notef("replay cut to %s from the start of the supply", w.cfg.Span)
	}
	if w.end <= w.start {
		return idlegrid.Invalid("span", "the replay span is empty")
	}
	w.binSeconds = int64(w.cfg.SampleEvery / time.Second)
	if w.binSeconds <= 0 {
		w.binSeconds = max(60, (w.end-w.start+599)/600/60*60)
	}
	w.offeredBins = make([]int64, (w.end-w.start+w.binSeconds-1)/w.binSeconds)
	return nil
}

func (w *world) notef(format string, args ...any) {
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

// buildNodes makes the world's nodes from the supply's that offer GPUs
// within the span, resampled to Config.Nodes: copies of random ones whose
// windows move by a whole number of days, wrapping around the span.
func (w *world) buildNodes(rng *rand.Rand) {
	all := w.cfg.Supply.Nodes
	always := []trace.Window{{Start: time.Unix(w.start, 0), End: time.Unix(w.end+idlegrid.MaxJobSeconds, 0)}}
	windows := func(t *trace.Node) []trace.Window {
		if len(t.Windows) == 0 { // around the clock; 30 days past the end so long jobs fit
			return always
		}
		return t.Windows
	}
	type inSpan struct {
		t    *trace.Node
		ws   []span
		asks []idlegrid.Micros
	}
	var src []inSpan
	for i := range all {
		if ws, asks := w.windowsOf(windows(&all[i]), 0); len(ws) > 0 {
			src = append(src, inSpan{&all[i], ws, asks})
		}
	}
	if out := len(all) - len(src); out > 0 {
		w.notef("%d of the trace's %d nodes offer no GPUs within the replay span and are left out", out, len(all))
	}
	want := w.cfg.Nodes
	if want <= 0 {
		want = len(src)
	}
	pick := sample(rng, len(src), want)
	switch {
	case want == len(src) || len(src) == 0:
	case len(src) < len(all):
		w.notef("%d nodes resampled from the %d offering GPUs within the span: copies move their windows by whole days", want, len(src))
	default:
		w.notef("%d nodes resampled from the trace's %d: copies move their windows by whole days", want, len(src))
	}
	unit := w.shiftUnit()
	for k, i := range pick {
		t := src[i].t
		n := &simNode{idx: int32(len(w.nodes)), id: t.ID, model: t.GPUModel, gpus: t.GPUs, region: t.Region}
		n.windows, n.asks = src[i].ws, src[i].asks
		if k >= len(src) { // a copy, named by its place in the draw: two copies of one node in one round differ
			n.id = t.ID + "#" + strconv.Itoa(k)
			shift := unit * rng.Int64N(max(1, (w.end-w.start)/unit))
			n.windows, n.asks = w.windowsOf(windows(t), shift)
		}
		if len(n.windows) > 0 {
			w.nodes = append(w.nodes, n)
		}
	}
	for _, x := range w.cfg.ExtraNodes {
		t := x.Node
		if len(t.Windows) == 0 {
			t.Windows = ScheduleWindows(x.Schedule, time.Unix(w.start, 0), time.Unix(w.end, 0))
		}
		n := &simNode{idx: int32(len(w.nodes)), id: t.ID, model: t.GPUModel, gpus: t.GPUs, region: t.Region, watched: true}
		n.windows, n.asks = w.windowsOf(t.Windows, 0)
		if len(n.windows) > 0 {
			w.nodes = append(w.nodes, n)
		}
	}
}

// checkNodeIDs refuses two nodes of one name: the engine keys its nodes
// by name, so the later would replace the earlier in the market while the
// offered GPU-hours and the baselines counted both.
func (w *world) checkNodeIDs() error {
	seen := make(map[string]bool, len(w.nodes))
	for _, n := range w.nodes {
		if seen[n.id] {
			field := "supply"
			if n.watched {
				field = "extra_nodes"
			}
			return idlegrid.Invalid(field, "two nodes are named %q; give every node its own name", n.id)
		}
		seen[n.id] = true
	}
	return nil
}

// shiftUnit is how far copies move: a day, or for spans under four days
// an eighth of the span, in whole minutes.
func (w *world) shiftUnit() int64 {
	if l := w.end - w.start; l < 4*86400 {
		return max(60, l/8/60*60)
	}
	return 86400
}

// windowsOf moves windows by shift seconds, wraps what falls past the end
// to the start, clips them to the span (an open end of a window that
// closes after the span stays, so that jobs near the end can fit), and
// returns them sorted with their asks (nil when the trace gave none).
func (w *world) windowsOf(ws []trace.Window, shift int64) ([]span, []idlegrid.Micros) {
	type piece struct {
		span
		ask idlegrid.Micros
	}
	var ps []piece
	l := w.end - w.start
	for _, x := range ws {
		s, e := x.Start.Unix()+shift, x.End.Unix()+shift
		if shift > 0 && s >= w.end {
			s, e = s-l, e-l
		} else if shift > 0 && e > w.end {
			ps = append(ps, piece{span{s, w.end}, x.Ask}, piece{span{w.start, e - l}, x.Ask})
			continue
		}
		ps = append(ps, piece{span{s, e}, x.Ask})
	}
	slices.SortFunc(ps, func(a, b piece) int { return cmp.Compare(a.start, b.start) })
	var out []span
	var asks []idlegrid.Micros
	anyAsk := false
	for _, p := range ps {
		p.start = max(p.start, w.start)
		if p.end <= p.start || p.start >= w.end {
			continue
		}
		if n := len(out); n > 0 && p.start <= out[n-1].end && p.ask == asks[n-1] { // touching pieces of a wrapped window
			out[n-1].end = max(out[n-1].end, p.end)
			continue
		} else if n > 0 && p.start < out[n-1].end {
			p.start = out[n-1].end
			if p.end <= p.start {
				continue
			}
		}
		out = append(out, p.span)
		asks = append(asks, p.ask)
		anyAsk = anyAsk || p.ask > 0
	}
	if !anyAsk {
		asks = nil
	}
	return out, asks
}

// sample picks want indexes of n: all of them in order first, then
// random ones; fewer than n is a random subset in order.
func sample(rng *rand.Rand, n, want int) []int {
	if n == 0 {
		return nil
	}
	if want < n {
		idx := rng.Perm(n)[:want]
		slices.Sort(idx)
		return idx
	}
	out := make([]int, 0, want)
	for i := range n {
		out = append(out, i)
	}
	for len(out) < want {
		out = append(out, rng.IntN(n))
	}
	return out
}

// setPrices reads the on-demand and marketplace price of every model of
// the world, by proxy where the tables lack one. The proxy is the median
// of the trace's own models that the tables price: the estimator's node
// and probe jobs never move the market's prices.
func (w *world) setPrices() {
	models := w.traceModels()
	proxy := w.standIn(models)
	for _, n := range w.nodes {
		if n.watched && n.model != "" {
			models[n.model] = true
		}
	}
	for _, m := range slices.Sorted(maps.Keys(models)) {
		w.priceModel(m, proxy)
	}
	if len(w.proxied) > 0 {
		w.notef("no on-demand price for %s: priced at %s/GPU-h, the median of this replay's models that the tables price",
			strings.Join(w.proxied, ", "), rate(proxy))
	}
}

// traceModels is the models the traces name: the supply's nodes (not the
// estimator's), the model mix, and the demand's jobs.
func (w *world) traceModels() map[string]bool {
	models := map[string]bool{}
	for _, n := range w.nodes {
		if n.model != "" && !n.watched {
			models[n.model] = true
		}
	}
	for _, m := range w.modelMix() {
		models[m.model] = true
	}
	for _, j := range w.cfg.Demand.Jobs {
		for _, m := range j.GPUModels {
			models[m] = true
		}
	}
	return models
}

// standIn is the on-demand price of a model the tables lack: the median
// on-demand price of the models given that the tables price, or $1 when
// they price none.
func (w *world) standIn(models map[string]bool) idlegrid.Micros {
	var known []idlegrid.Micros
	for m := range models {
		if od, ok := w.cfg.Prices.OnDemand(m); ok {
			known = append(known, od)
		}
	}
	if proxy := trace.MedianMicros(known); proxy > 0 {
		return proxy
	}
	return idlegrid.MicrosPerUnit
}

// priceModel sets a model's on-demand price (proxy when the tables lack
// it) and market price (40% of on-demand when they lack it).
func (w *world) priceModel(m string, proxy idlegrid.Micros) {
	p := w.cfg.Prices
	od, ok := p.OnDemand(m)
	if !ok {
		od = proxy
		w.proxied = append(w.proxied, m)
	}
	w.onDemand[m] = od
	if mk, ok := p.Market(m); ok {
		w.market[m] = mk
	} else {
		w.market[m] = od * proxyMarketPercent / 100
	}
}

type weighted struct {
	model string
	w     int
}

// modelMix is the models to draw for nodes the trace gives none, most
// GPUs first.
func (w *world) modelMix() []weighted {
	mix := w.cfg.ModelMix
	if len(mix) == 0 {
		mix = map[string]int{DefaultModel: 1}
	}
	var out []weighted
	for _, m := range trace.SortedModels(mix) {
		if mix[m] > 0 {
			out = append(out, weighted{m, mix[m]})
		}
	}
	return out
}

// DefaultModel is the GPU model of nodes whose trace names none when no
// model mix is given: Helios's Earth cluster ran V100s.
const DefaultModel = "V100-32GB"

// regionMix is where nodes the trace places nowhere go: the continents of
// the marketplace offers (EU, NA, AS) as eu-west, us-east and ap-east, in
// proportion; all three alike when there are none.
func (w *world) regionMix() []weighted {
	count := map[string]int{}
	for _, o := range w.cfg.Prices.Offers {
		if r := continentRegion(o.Region); o.Source == "marketplace" && r != "" {
			count[r]++
		}
	}
	if len(count) == 0 {
		count = map[string]int{"eu-west": 1, "us-east": 1, "ap-east": 1}
	}
	var out []weighted
	for _, r := range slices.Sorted(maps.Keys(count)) {
		out = append(out, weighted{r, count[r]})
	}
	return out
}

func continentRegion(c string) string {
	switch strings.ToUpper(c) {
	case "EU":
		return "eu-west"
	case "NA":
		return "us-east"
	case "AS":
		return "ap-east"
	}
	return ""
}

func draw(rng *rand.Rand, ws []weighted) string {
	total := 0
	for _, x := range ws {
		total += x.w
	}
	k := rng.IntN(total)
	for _, x := range ws {
		if k < x.w {
			return x.model
		}
		k -= x.w
	}
	return ws[len(ws)-1].model
}

// priceNodes gives every node a model and a region where the trace gave
// none, an ask, a true reliability and a record.
func (w *world) priceNodes(rng *rand.Rand) {
	models, regions := w.modelMix(), w.regionMix()
	extra := map[string]ExtraNode{}
	for _, x := range w.cfg.ExtraNodes {
		extra[x.Node.ID] = x
	}
	for _, n := range w.nodes {
		if n.model == "" {
			n.model = draw(rng, models)
		}
		if n.region == "" {
			n.region = draw(rng, regions)
		}
		n.residency = residencyOf(n.region)
		n.vramMB = vramOf(n.model)
		if _, ok := w.market[n.model]; !ok { // a model only the supply named
			od, ok := w.cfg.Prices.OnDemand(n.model)
			if !ok {
				od = trace.MedianMicros(slices.Collect(maps.Values(w.onDemand)))
				w.proxied = append(w.proxied, n.model)
			}
			w.onDemand[n.model] = od
			if mk, ok := w.cfg.Prices.Market(n.model); ok {
				w.market[n.model] = mk
			} else {
				w.market[n.model] = od * proxyMarketPercent / 100
			}
		}
		jitter := idlegrid.Micros(80 + rng.IntN(46)) // 80% to 125% of the market price
		n.ask = max(1, w.market[n.model]*jitter/100)
		for i, a := range n.asks {
			if a == 0 {
				n.asks[i] = n.ask
			}
		}
		n.rel, n.histCompleted, n.histFailed = drawReliability(rng)
		if r := w.cfg.Reliability; r > 0 {
			n.rel, n.histCompleted, n.histFailed = min(r, 1), historyLeases, 0
		}
		if x, ok := extra[n.id]; ok && n.watched { // a newcomer: no record yet
			n.histCompleted, n.histFailed = 0, 0
			if x.Reliability > 0 {
				n.rel = min(x.Reliability, 1)
			}
			if x.Ask > 0 {
				n.ask = x.Ask
			}
		}
	}
}

// drawReliability draws a node's true reliability, the share of leases
// it completes: four nodes in five are steady (0.95 to 0.995), one is
// flaky (0.60 to 0.95). Its record before the replay is 20 leases, each
// failed with that chance.
func drawReliability(rng *rand.Rand) (rel float64, completed, failed int64) {
	if rng.IntN(5) < 4 {
		rel = 0.95 + 0.045*rng.Float64()
	} else {
		rel = 0.60 + 0.35*rng.Float64()
	}
	for range historyLeases {
		if rng.Float64() < rel {
			completed++
		} else {
			failed++
		}
	}
	return rel, completed, failed
}

// historyLeases is the record every node brings into the replay.
const historyLeases = 20

func residencyOf(region string) string {
	prefix, _, _ := strings.Cut(region, "-")
	switch prefix {
	case "eu":
		return "EU"
	case "us":
		return "US"
	case "ap":
		return "AP"
	}
	return strings.ToUpper(prefix)
}

// vramOf is the memory of a model's GPUs: as idlegrid's GPU catalog says,
// or as its name says ("V100-32GB"), or 16 GB.
func vramOf(model string) int {
	if m, ok := gpu.LookupModel(model); ok {
		return m.VRAMMB
	}
	if i := strings.LastIndexByte(model, '-'); i >= 0 && strings.HasSuffix(model, "GB") {
		if gb, err := strconv.Atoi(model[i+1 : len(model)-2]); err == nil && gb > 0 && gb < 10_000 {
			return gb * 1024
		}
	}
	return 16 * 1024
}

// buildJobs aligns the demand with the supply, keeps the jobs submitted
// within the span, resamples them to Config.Jobs, and sets tiers and caps.
func (w *world) buildJobs(rng *rand.Rand) error {
	d := w.cfg.Demand
	shift := w.alignment()
	var in []int
	for i, j := range d.Jobs {
		if s := j.Submit.Unix() + shift; s >= w.start && s < w.end {
			in = append(in, i)
		}
	}
	if out := len(d.Jobs) - len(in); out > 0 {
		w.notef("%d of the demand's %d jobs were submitted outside the replay span and are left out", out, len(d.Jobs))
	}
	if len(in) == 0 && len(w.cfg.Probes) == 0 {
		return idlegrid.Invalid("demand", "no job is submitted within the replay span (%s to %s)",
			time.Unix(w.start, 0).UTC().Format(time.RFC3339), time.Unix(w.end, 0).UTC().Format(time.RFC3339))
	}
	want := w.cfg.Jobs
	if want <= 0 {
		want = len(in)
	}
	if want != len(in) && len(in) > 0 {
		w.notef("%d jobs resampled from the %d in the span: copies move their submit time by whole days", want, len(in))
	}
	setIdx := map[string]uint16{"": 0}
	regIdx := map[string]uint16{"": 0}
	unit, l := w.shiftUnit(), w.end-w.start
	picks := sample(rng, len(in), want)
	if len(in) == 0 {
		picks = nil
	}
	w.jobs = make([]jobSpec, 0, len(picks)+len(w.cfg.Probes)*64)
	w.jobIDs = make([]string, len(d.Jobs))
	for i := range d.Jobs {
		w.jobIDs[i] = d.Jobs[i].ID
	}
	for k, p := range picks {
		t := &d.Jobs[in[p]]
		js := w.spec(t, setIdx, regIdx)
		js.src = int32(in[p])
		js.submit = t.Submit.Unix() + shift
		if k >= len(in) {
			js.copy = int32(k / len(in))
			js.submit += unit * rng.Int64N(max(1, l/unit))
			if js.submit >= w.end {
				js.submit -= l
			}
		}
		w.jobs = append(w.jobs, js)
	}
	w.addProbes(setIdx, regIdx)
	slices.SortStableFunc(w.jobs, func(a, b jobSpec) int { return cmp.Compare(a.submit, b.submit) })
	return nil
}

// alignment is how far demand times move: none when demand and supply
// count time alike (both on the calendar, or both from their start), or
// when the demand's own submit times set the span (supply without
// windows); otherwise the demand's median submit time moves to the middle
// of the span, to the minute. Config.Align overrides it, except where the
// span is the demand's own.
func (w *world) alignment() int64 {
	d := w.cfg.Demand
	if len(d.Jobs) == 0 {
		return 0
	}
	if w.spanOfDemand {
		return 0 // the span is the demand's own: it is already on it
	}
	align := w.cfg.Align
	if align == AlignAuto {
		align = AlignNone
		if d.Relative != w.cfg.Supply.Relative {
			align = AlignMedian
		}
	}
	if align == AlignNone {
		return 0
	}
	median := d.Jobs[(len(d.Jobs)-1)/2].Submit.Unix()
	mid := w.start + (w.end-w.start)/2
	shift := (mid - median) / 60 * 60
	from := time.Unix(median, 0).UTC().Format("2006-01-02 15:04 UTC")
	if d.Relative {
		from = fmt.Sprintf("day %.1f of its trace", float64(median-trace.Epoch.Unix())/86400)
	}
	w.notef("demand moved onto the supply's span: its median submit time, %s, is now the middle of the span, %s",
		from, time.Unix(mid, 0).UTC().Format("2006-01-02 15:04 UTC"))
	return shift
}

// spec turns a trace job into a jobSpec (times unset).
func (w *world) spec(t *trace.Job, setIdx, regIdx map[string]uint16) jobSpec {
	tier := t.Tier
	if tier == "" {
		tier = idlegrid.TierSilver
	}
	js := jobSpec{dur: int32(t.DurationSeconds), gpus: int8(t.GPUs), tier: int8(tier.Rank())}
	js.ckpt = int32(t.CheckpointEverySeconds)
	if js.ckpt == 0 {
		js.ckpt = int32(w.cfg.CheckpointEvery / time.Second)
	}
	key := strings.Join(t.GPUModels, "|")
	idx, ok := setIdx[key]
	if !ok {
		idx = uint16(len(w.modelSets))
		setIdx[key] = idx
		w.modelSets = append(w.modelSets, t.GPUModels)
	}
	js.models = idx
	r, ok := regIdx[t.Region]
	if !ok {
		r = uint16(len(w.regions))
		regIdx[t.Region] = r
		w.regions = append(w.regions, t.Region)
	}
	js.region = r
	js.cap = t.MaxPrice
	if js.cap == 0 {
		js.cap = max(1, w.reference(js.models)*idlegrid.Micros(capPercent(tier))/100)
	}
	return js
}

// reference is the on-demand price a renter compares with: the median
// on-demand price of the models the job accepts (of the trace's nodes'
// models, for a job that accepts any: the estimator's node moves no cap).
func (w *world) reference(set uint16) idlegrid.Micros {
	if p, ok := w.refs[set]; ok {
		return p
	}
	p := w.referenceOf(w.modelSets[set])
	if w.refs == nil {
		w.refs = map[uint16]idlegrid.Micros{}
	}
	w.refs[set] = p
	return p
}

func (w *world) referenceOf(models []string) idlegrid.Micros {
	if len(models) == 0 {
		seen := map[string]bool{}
		for _, n := range w.nodes {
			if !seen[n.model] && !n.watched {
				seen[n.model] = true
				models = append(models, n.model)
			}
		}
	}
	var ps []idlegrid.Micros
	for _, m := range models {
		if p, ok := w.onDemand[m]; ok {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return trace.MedianMicros(slices.Collect(maps.Values(w.onDemand)))
	}
	return trace.MedianMicros(ps)
}

// index sorts every window start, and counts the offered GPU-seconds in
// total and per sample bin.
func (w *world) index() {
	for _, n := range w.nodes {
		for _, s := range n.windows {
			w.opens = append(w.opens, s.start)
			e := min(s.end, w.end)
			w.offered += (e - s.start) * int64(n.gpus)
			w.addBins(w.offeredBins, s.start, e, int64(n.gpus))
		}
	}
	slices.Sort(w.opens)
}

// addBins adds gpus × the seconds of [from, to) in each bin to bins.
func (w *world) addBins(bins []int64, from, to, gpus int64) {
	from, to = max(from, w.start), min(to, w.end)
	for from < to {
		b := (from - w.start) / w.binSeconds
		edge := min(to, w.start+(b+1)*w.binSeconds)
		bins[b] += (edge - from) * gpus
		from = edge
	}
}

// opened reports whether a window opens in (after, upTo].
func (w *world) opened(after, upTo int64) bool {
	i, _ := slices.BinarySearch(w.opens, after+1)
	return i < len(w.opens) && w.opens[i] <= upTo
}

// ScheduleWindows is the windows of a schedule between start and end, as
// the engine reads them (Schedule.AvailableUntil and NextOpening).
func ScheduleWindows(s idlegrid.Schedule, start, end time.Time) []trace.Window {
	var out []trace.Window
	for t := start; t.Before(end); {
		if u := s.AvailableUntil(t); u.After(t) {
			u = minTime(u, end)
			out = append(out, trace.Window{Start: t, End: u})
			t = u
			continue
		}
		o := s.NextOpening(t)
		if o.IsZero() || !o.After(t) {
			break
		}
		t = o
	}
	// Joined where AvailableUntil stopped at its horizon.
	merged := out[:0]
	for _, w := range out {
		if n := len(merged); n > 0 && !w.Start.After(merged[n-1].End) {
			merged[n-1].End = w.End
			continue
		}
		merged = append(merged, w)
	}
	return merged
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
