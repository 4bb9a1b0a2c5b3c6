package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid/internal/sim"
	"github.com/idlegrid/idlegrid/internal/trace"
)

// simCommand is "idlegrid sim": replay real traces through the real
// engine, and through baselines beside it.
type simCommand struct{ env *env }

// traceFlags are the inputs sim and estimate share.
type traceFlags struct {
	e                      *env
	demand, supply, prices string
	supplyModels           string
	badRows                string
	nodeGPUs               int
	minWindow              durationFlag
	align                  string
}

func (e *env) traceFlags(fs *flagSet) *traceFlags {
	t := &traceFlags{e: e}
	fs.StringVar(&t.demand, "demand", "", "demand trace: alibaba:PATH (pod list, or its folder) or csv:PATH (default alibaba:DATA/alibaba-gpu-2023)")
	fs.StringVar(&t.supply, "supply", "", "supply trace: helios:PATH (VC series folder), alibaba:PATH (node list, offered around the clock) or csv:PATH (default helios:DATA/helios-idle-2020)")
	fs.StringVar(&t.prices, "prices", "", "price tables folder: cloud-gpus.csv and optionally vast-snapshot/vms.csv (default DATA/gpu-prices)")
	fs.StringVar(&t.supplyModels, "supply-models", "", "GPU models for nodes whose trace names none (Helios): alibaba:PATH (the node list's mix) or MODEL:WEIGHT,... (default: the Alibaba node list beside the demand, else "+sim.DefaultModel+")")
	fs.StringVar(&t.badRows, "bad-rows", "fail", "a row that cannot be read: fail (stop, naming the line) or skip (count it and go on)")
	fs.IntVar(&t.nodeGPUs, "helios-node-gpus", trace.DefaultHeliosNodeGPUs, "GPUs per node when turning Helios VCs into nodes")
	t.minWindow.secs = int64(trace.DefaultHeliosMinWindow / time.Second)
	fs.Var(&t.minWindow, "helios-min-window", "shortest Helios idle span offered as a window")
	fs.StringVar(&t.align, "align", "auto", "move demand times onto the supply's span: auto, median or none")
	return t
}

// dataDir is where the traces are by default: $IDLEGRID_TRACE_DATA, or
// ../shared/data beside the repository.
func (t *traceFlags) dataDir() string {
	if d := t.e.getenv("IDLEGRID_TRACE_DATA"); d != "" {
		return d
	}
	return filepath.Join("..", "shared", "data")
}

// errNoData explains where the traces come from.
func (t *traceFlags) errNoData(what, path string) error {
	return withHint(fmt.Errorf("no %s trace at %s", what, path),
		"give --demand, --supply and --prices, or put the traces under "+t.dataDir()+" (or $IDLEGRID_TRACE_DATA):\n"+
			"    alibaba-gpu-2023/  github.com/alibaba/clusterdata, cluster-trace-gpu-v2023/csv\n"+
			"    helios-idle-2020/earth_vc_minutely/  github.com/S-Lab-System-Group/HeliosArtifact, Earth_vcs/<vc>/cluster_sequence_vc.csv\n"+
			"    gpu-prices/  github.com/the-full-stack/website, docs/cloud-gpus/cloud-gpus.csv\n"+
			"  docs/traces.md describes every format, and the generic CSVs for your own traces")
}

// load reads the three traces and the model mix.
func (t *traceFlags) load() (sim.Config, error) {
	var cfg sim.Config
	bad, err := trace.ParseBadRows(t.badRows)
	if err != nil {
		return cfg, err
	}
	opts := trace.Options{BadRows: bad}
	if t.nodeGPUs < 1 || t.nodeGPUs > 64 {
		return cfg, usagef("--helios-node-gpus must be between 1 and 64, got %d", t.nodeGPUs)
	}
	switch t.align {
	case "auto":
	case "median":
		cfg.Align = sim.AlignMedian
	case "none":
		cfg.Align = sim.AlignNone
	default:
		return cfg, usagef("--align must be auto, median or none, got %q", t.align)
	}
	demand := firstNonEmpty(t.demand, "alibaba:"+filepath.Join(t.dataDir(), "alibaba-gpu-2023"))
	if cfg.Demand, err = t.loadDemand(demand, opts); err != nil {
		return cfg, err
	}
	supply := firstNonEmpty(t.supply, "helios:"+filepath.Join(t.dataDir(), "helios-idle-2020"))
	if cfg.Supply, err = t.loadSupply(supply, opts); err != nil {
		return cfg, err
	}
	prices := firstNonEmpty(t.prices, filepath.Join(t.dataDir(), "gpu-prices"))
	if _, err := os.Stat(prices); err != nil {
		return cfg, t.errNoData("price", prices)
	}
	if cfg.Prices, err = trace.ReadPrices(os.DirFS(prices), prices, opts); err != nil {
		return cfg, err
	}
	cfg.ModelMix, err = t.modelMix(demand, opts)
	return cfg, err
}

func splitSpec(flag, spec string, kinds ...string) (kind, path string, err error) {
	kind, path, ok := strings.Cut(spec, ":")
	if !ok || path == "" {
		return "", "", usagef("--%s must be KIND:PATH with KIND one of %s, got %q", flag, strings.Join(kinds, ", "), spec)
	}
	for _, k := range kinds {
		if k == kind {
			return kind, path, nil
		}
	}
	return "", "", usagef("--%s: unknown kind %q; use %s", flag, kind, strings.Join(kinds, ", "))
}

// inFolder returns path, or file inside it when path is a folder.
func inFolder(path, file string) string {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return filepath.Join(path, file)
	}
	return path
}

func (t *traceFlags) open(what, path string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, t.errNoData(what, path)
	}
	return f, err
}

func (t *traceFlags) loadDemand(spec string, opts trace.Options) (*trace.Demand, error) {
	kind, path, err := splitSpec("demand", spec, "alibaba", "csv")
	if err != nil {
		return nil, err
	}
	if kind == "alibaba" {
		path = inFolder(path, trace.AlibabaPodFile)
	}
	f, err := t.open("demand", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if kind == "alibaba" {
		return trace.ReadAlibabaPods(f, path, trace.AlibabaOptions{Options: opts})
	}
	return trace.ReadDemandCSV(f, path, opts)
}

func (t *traceFlags) loadSupply(spec string, opts trace.Options) (*trace.Supply, error) {
	kind, path, err := splitSpec("supply", spec, "helios", "alibaba", "csv")
	if err != nil {
		return nil, err
	}
	if kind == "helios" {
		if fi, err := os.Stat(filepath.Join(path, "earth_vc_minutely")); err == nil && fi.IsDir() {
			path = filepath.Join(path, "earth_vc_minutely")
		}
		if _, err := os.Stat(path); err != nil {
			return nil, t.errNoData("supply", path)
		}
		return trace.ReadHeliosDir(os.DirFS(path), path, trace.HeliosOptions{
			Options: opts, NodeGPUs: t.nodeGPUs, MinWindow: time.Duration(t.minWindow.secs) * time.Second,
		})
	}
	if kind == "alibaba" {
		path = inFolder(path, trace.AlibabaNodeFile)
	}
	f, err := t.open("supply", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if kind == "alibaba" {
		return trace.ReadAlibabaNodes(f, path, opts)
	}
	return trace.ReadSupplyCSV(f, path, opts)
}

// modelMix is the mix of GPU models for nodes whose trace names none.
func (t *traceFlags) modelMix(demand string, opts trace.Options) (map[string]int, error) {
	spec := t.supplyModels
	if spec == "" {
		kind, path, _ := strings.Cut(demand, ":")
		if kind != "alibaba" {
			return nil, nil
		}
		dir := path
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
			dir = filepath.Dir(path)
		}
		nodes := filepath.Join(dir, trace.AlibabaNodeFile)
		if _, err := os.Stat(nodes); err != nil {
			return nil, nil
		}
		spec = "alibaba:" + nodes
	}
	if path, ok := strings.CutPrefix(spec, "alibaba:"); ok {
		f, err := t.open("node list", inFolder(path, trace.AlibabaNodeFile))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		s, err := trace.ReadAlibabaNodes(f, path, opts)
		if err != nil {
			return nil, err
		}
		return trace.ModelMix(s.Nodes), nil
	}
	mix := map[string]int{}
	for _, part := range strings.Split(spec, ",") {
		model, weight, hasWeight := strings.Cut(strings.TrimSpace(part), ":")
		w := 1
		if hasWeight {
			n, err := strconv.Atoi(weight)
			if err != nil || n < 1 {
				return nil, usagef("--supply-models: weight of %s must be a whole number above 0, got %q", model, weight)
			}
			w = n
		}
		if model == "" {
			return nil, usagef("--supply-models: empty model in %q", spec)
		}
		mix[trace.CanonicalModel(model, 0)] += w
	}
	return mix, nil
}

// spanFlag is a duration that also takes days: 7d, 36h, 90m.
type spanFlag struct{ d time.Duration }

func (s *spanFlag) String() string {
	if s.d == 0 {
		return ""
	}
	return s.d.String()
}

func (s *spanFlag) Set(v string) error {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n <= 0 || n > 3650 {
			return fmt.Errorf("want a number of days such as 7d, got %q", v)
		}
		s.d = time.Duration(n * float64(24*time.Hour))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a duration such as 7d, 36h or 90m, got %q", v)
	}
	s.d = d
	return nil
}

func (c *simCommand) Run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "cheaters" {
		return (&simCheatersCommand{env: c.env}).Run(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "inference" {
		return (&simInferenceCommand{env: c.env}).Run(ctx, args[1:])
	}
	fs := c.env.flags("sim", help{
		usage: "idlegrid sim [--demand alibaba:PATH|csv:PATH] [--supply helios:PATH|alibaba:PATH|csv:PATH] [--prices PATH] [--nodes N] [--jobs N] [--seed S] [--out DIR] [--json] [--bad-rows fail|skip]",
		about: `Replay a demand trace against a supply trace through idlegrid's market
engine (the code the server runs) on a virtual clock, and through three
baselines beside it: FIFO first-fit, cheapest-first without reliability
weighting, and pay-as-bid. Report, for each: fill rate, renter cost against
cloud on-demand prices, provider earnings per offered GPU-hour, queue waits
per tier, preemptions and the work they lost, jobs never placed and why,
and time per decision. With --out, write plots (SVG) of utilisation,
clearing prices per GPU model and queue length per tier.

By default the traces are read from ../shared/data (or $IDLEGRID_TRACE_DATA):
the Alibaba GPU 2023 pod list as demand, the Helios Earth per-minute idle
GPUs as supply, and the FSDL cloud and Vast.ai price tables. --nodes and
--jobs resample them to a size. docs/traces.md states every mapping choice
and the generic CSV formats for your own traces.

'idlegrid sim cheaters' is another simulation: cheating providers against
the real coordinator (run it with --help). 'idlegrid sim inference'
replays the Azure LLM inference trace through the real gateway.`,
		examples: `idlegrid sim
		idlegrid sim --out sim-out
		idlegrid sim --nodes 100000 --jobs 1000000 --runs engine
		idlegrid sim --demand csv:jobs.csv --supply csv:nodes.csv --prices ../shared/data/gpu-prices --bad-rows skip --json`,
	})
	fs.subwords = []string{"cheaters", "inference"}
	tf := c.env.traceFlags(fs)
	var (
		nodes, jobs, parallel int
		seed                  uint64
		out, runs             string
		asJSON, quiet         bool
		span, patience        spanFlag
		checkpoint            durationFlag
		feeBPS                int64
	)
	fs.IntVar(&nodes, "nodes", 0, "resample the supply to N nodes (0: as in the trace)")
	fs.IntVar(&jobs, "jobs", 0, "resample the demand to N jobs (0: as in the trace)")
	fs.Uint64Var(&seed, "seed", 1, "seed for every random draw (models, regions, asks, reliability, failures, resampling)")
	fs.StringVar(&out, "out", "", "folder for utilisation.svg, prices.svg, queue.svg, metrics.json and summary.txt")
	fs.BoolVar(&asJSON, "json", false, "print one flat JSON object of named metrics")
	fs.StringVar(&runs, "runs", strings.Join(sim.DefaultRuns, ","), "what to run: engine and the baselines fifo, cheapest, pay-as-bid")
	fs.IntVar(&parallel, "parallel", 1, "runs at once (more is faster on more cores, but disturbs the timings)")
	fs.Var(&span, "span", "replay only this long from the start of the supply, e.g. 7d")
	patience.d = sim.DefaultPatience
	fs.Var(&patience, "patience", "how long a renter waits for a placement before giving up")
	fs.Var(&checkpoint, "checkpoint-every", "how often jobs checkpoint (default never: a stop loses the whole run)")
	fs.Int64Var(&feeBPS, "fee-bps", sim.DefaultFeeBasisPoints, "the platform's fee in basis points, as the server's --fee-bps")
	fs.BoolVar(&quiet, "quiet", false, "no progress on standard error")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	if nodes < 0 || jobs < 0 {
		return usagef("--nodes and --jobs must not be negative")
	} else if parallel < 1 {
		return usagef("--parallel must be at least 1, got %d", parallel)
	} else if err := checkFee(feeBPS); err != nil {
		return err
	}
	runNames, err := parseRuns(runs)
	if err != nil {
		return err
	}
	began := time.Now()
	cfg, err := tf.load()
	if err != nil {
		return err
	}
	read := time.Since(began)
	cfg.Nodes, cfg.Jobs, cfg.Seed, cfg.Span, cfg.Patience = nodes, jobs, seed, span.d, patience.d
	cfg.CheckpointEvery = time.Duration(checkpoint.secs) * time.Second
	cfg.FeeBasisPoints, cfg.Parallel, cfg.Runs = replayFee(feeBPS), parallel, runNames
	if !quiet {
		p := newProgress(c.env.Err)
		cfg.Progress = p.update
		defer p.done()
	}
	res, err := sim.Run(ctx, cfg)
	if err != nil {
		return err
	}
	res.ReadWall = read
	if out != "" {
		if err := writeSimOut(res, out); err != nil {
			return err
		}
	}
	if asJSON {
		return printJSON(c.env.Out, res.Flat())
	}
	if err := res.WriteText(c.env.Out); err != nil {
		return err
	}
	if out != "" {
		fmt.Fprintf(c.env.Out, "plots and metrics written to %s (utilisation.svg, prices.svg, queue.svg, metrics.json, summary.txt)\n", out)
	}
	return nil
}

// parseRuns reads --runs: each run once, at least one.
func parseRuns(list string) ([]string, error) {
	var runs []string
	for _, r := range strings.Split(list, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		} else if slices.Contains(runs, r) {
			return nil, usagef("--runs names %s twice; name each run once", r)
		} else if _, ok := sim.RunTitles[r]; !ok {
			return nil, usagef("--runs: unknown run %q; use %s", r, strings.Join(sim.DefaultRuns, ", "))
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return nil, usagef("--runs names nothing to run")
	}
	return runs, nil
}

// checkFee refuses a --fee-bps the server would refuse.
func checkFee(bps int64) error {
	if bps < 0 || bps > 10000 {
		return usagef("--fee-bps must be between 0 and 10000, got %d", bps)
	}
	return nil
}

// replayFee is --fee-bps as sim.Config takes it: there 0 is the default
// fee, and a negative fee none.
func replayFee(bps int64) int64 {
	if bps == 0 {
		return -1
	}
	return bps
}

// writeSimOut writes the plots, the flat metrics and the text summary.
func writeSimOut(res *sim.Result, dir string) error {
	if _, err := res.WritePlots(dir); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "metrics.json"))
	if err != nil {
		return err
	}
	err = printJSON(f, res.Flat())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	s, err := os.Create(filepath.Join(dir, "summary.txt"))
	if err != nil {
		return err
	}
	err = res.WriteText(s)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// progress shows how far the runs are on standard error: a bar redrawn in
// place on a terminal, or a line every few seconds otherwise.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	last  time.Time
	shown bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// progressEvery is how often a non-terminal gets a line.
const progressEvery = 5 * time.Second

func (p *progress) update(s sim.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	finished := s.Done >= 1
	now := time.Now()
	if !p.tty && !finished && now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	const width = 30
	line := fmt.Sprintf("%s %3.0f%% %s (%d/%d) at %s: %d jobs, %d placed, %d queued, %s",
		bar(s.Done, width), 100*s.Done, s.Run, s.Index+1, s.Of, s.Virtual.Format("2006-01-02 15:04"), s.Jobs, s.Placements, s.Queued,
		s.Wall.Round(100*time.Millisecond))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.shown = true
		if finished {
			fmt.Fprintln(p.w)
			p.shown = false
		}
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintln(p.w)
	}
}
