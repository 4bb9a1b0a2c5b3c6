package sim

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trace"
)

var worldTestdata = filepath.Join("..", "..", "testdata", "traces")

// csvConfig is a replay of generic demand and supply CSVs.
func csvConfig(tb testing.TB, demand, supply string) Config {
	tb.Helper()
	d, err := trace.ReadDemandCSV(strings.NewReader(demand), "demand.csv", trace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := trace.ReadSupplyCSV(strings.NewReader(supply), "supply.csv", trace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := trace.ReadPrices(os.DirFS(filepath.Join(worldTestdata, "prices")), "prices", trace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return Config{Demand: d, Supply: s, Prices: p, Seed: 1, Reliability: 1}
}

func mustWorld(tb testing.TB, cfg Config) *world {
	tb.Helper()
	w, err := buildWorld(cfg.withDefaults())
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

const twoNodes = "node,gpu_model,gpus,region,window_start,window_end\n" +
	"a,T4,1,eu-west,0,86400\nb,T4,2,eu-west,0,86400\n"

// Copies drawn from the same node in one round of the draw must not share
// a name: the engine keys nodes by name, and would keep only one of them.
func TestWorld_copiesHaveTheirOwnNames(t *testing.T) {
	cfg := csvConfig(t, "submit,duration,gpus\n0,600,1\n", twoNodes)
	for seed := range uint64(5) {
		cfg.Seed, cfg.Nodes = seed, 60
		w := mustWorld(t, cfg)
		seen := map[string]bool{}
		for _, n := range w.nodes {
			if seen[n.id] {
				t.Fatalf("seed %d: two nodes named %q among %d", seed, n.id, len(w.nodes))
			}
			seen[n.id] = true
		}
		if len(seen) != 60 {
			t.Errorf("seed %d: %d names for 60 nodes", seed, len(seen))
		}
	}
}

func TestWorld_refusesTwoNodesOfOneName(t *testing.T) {
	cfg := csvConfig(t, "submit,duration,gpus\n0,600,1\n", twoNodes)
	cfg.ExtraNodes = []ExtraNode{{Node: trace.Node{ID: "a", GPUModel: "T4", GPUs: 1, Region: "eu-west"},
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}}}
	_, err := buildWorld(cfg.withDefaults())
	if want := `extra_nodes: two nodes are named "a"; give every node its own name`; idlegrid.ErrorMessage(err) != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// The estimator's node, of a model the tables price, must not move the
// market's prices: neither the stand-in price of the models the tables
// lack, nor the caps of jobs that accept any model.
func TestWorld_extraNodeMovesNoPrice(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end\n" +
		"t,T4,1,eu-west,0,86400\nv,V100-32GB,1,eu-west,0,86400\nm,MysteryGPU,1,eu-west,0,86400\n"
	const demand = "submit,duration,gpus,tier\n0,600,1,gold\n60,600,1,silver\n120,600,1,bronze\n"
	plain := mustWorld(t, csvConfig(t, demand, supply))
	cfg := csvConfig(t, demand, supply)
	cfg.ExtraNodes = []ExtraNode{{Node: trace.Node{ID: "your-node", GPUModel: "H100-80GB", GPUs: 8, Region: "eu-west"},
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}}}
	with := mustWorld(t, cfg)
	if len(plain.proxied) != 1 {
		t.Fatalf("proxied %q, want the mystery GPU alone", plain.proxied)
	}
	for m := range plain.onDemand {
		if plain.onDemand[m] != with.onDemand[m] || plain.market[m] != with.market[m] {
			t.Errorf("%s: on-demand %s, market %s; with the estimator's H100 node %s and %s", m,
				plain.onDemand[m], plain.market[m], with.onDemand[m], with.market[m])
		}
	}
	if with.onDemand["H100-80GB"] == 0 || len(with.jobs) != len(plain.jobs) {
		t.Fatalf("the H100 is unpriced (%s) or jobs differ (%d, %d)", with.onDemand["H100-80GB"], len(with.jobs), len(plain.jobs))
	}
	for i := range plain.jobs {
		if plain.jobs[i].cap != with.jobs[i].cap {
			t.Errorf("job %d: cap %s, with the estimator's node %s", i, plain.jobs[i].cap, with.jobs[i].cap)
		}
	}
}

// Supply without windows takes its span from the demand's submit times;
// the demand is then on its span already, even when it is on the calendar
// and the supply counts from its start.
func TestWorld_demandSetsTheSpan(t *testing.T) {
	s, err := trace.ReadAlibabaNodes(mustFile(t, filepath.Join(worldTestdata, "alibaba", trace.AlibabaNodeFile)), "nodes", trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("submit,duration,gpus\n")
	at := time.Date(2024, 3, 4, 8, 0, 0, 0, time.UTC)
	for i := range 9 {
		b.WriteString(at.Add(time.Duration(i)*time.Minute).Format(time.RFC3339) + ",600,1\n")
	}
	b.WriteString(at.Add(5*24*time.Hour).Format(time.RFC3339) + ",600,1\n")
	cfg := csvConfig(t, b.String(), twoNodes)
	cfg.Supply = s
	if cfg.Demand.Relative || !s.Relative {
		t.Fatalf("want demand on the calendar and supply from its start")
	}
	w := mustWorld(t, cfg)
	if len(w.jobs) != 10 {
		t.Errorf("%d of the demand's 10 jobs in the replay; notes %q", len(w.jobs), w.notes)
	}
	for _, n := range w.notes {
		if strings.Contains(n, "left out") || strings.Contains(n, "demand moved") {
			t.Errorf("note %q: the demand set the span, nothing should move", n)
		}
	}
}

func TestWorld_refusesSubSecondProbes(t *testing.T) {
	cfg := csvConfig(t, "submit,duration,gpus\n0,600,1\n", twoNodes)
	cfg.Probes = []Probe{{Every: 500 * time.Millisecond, Job: trace.Job{GPUs: 1, DurationSeconds: 600}}}
	_, err := buildWorld(cfg.withDefaults())
	if want := "probes.every: must be at least a second (0: every 6 hours), got 500ms"; idlegrid.ErrorMessage(err) != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestRun_refusesARunNamedTwice(t *testing.T) {
	if err := checkRuns([]string{RunEngine, RunFIFO, RunEngine}); idlegrid.ErrorMessage(err) != `runs: "engine" is named twice; name each run once` {
		t.Errorf("error %v", err)
	}
}

func mustFile(tb testing.TB, path string) *strings.Reader {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.NewReader(string(data))
}

// --nodes N with --span: the nodes are drawn from those that offer GPUs
// within the span, as jobs are drawn from those submitted within it, so
// that the replay has the N nodes asked for, and the report says so.
func TestWorld_resamplesNodesWithinTheSpan(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end\n" +
		"early,T4,1,eu-west,0,3600\nlate,T4,1,eu-west,172800,176400\n"
	cfg := csvConfig(t, "submit,duration,gpus\n0,600,1\n", supply)
	cfg.Span = 24 * time.Hour
	w := mustWorld(t, cfg)
	if len(w.nodes) != 1 || w.nodes[0].id != "early" {
		t.Fatalf("nodes %v, want early alone", w.nodes)
	}
	if !slices.ContainsFunc(w.notes, func(n string) bool {
		return strings.Contains(n, "1 of the trace's 2 nodes offer no GPUs within the replay span")
	}) {
		t.Errorf("notes %q say nothing of the node left out", w.notes)
	}
	cfg.Nodes = 5
	w = mustWorld(t, cfg)
	if len(w.nodes) != 5 {
		t.Errorf("--nodes 5 with a span: %d nodes", len(w.nodes))
	}
	if !slices.Contains(w.notes, "5 nodes resampled from the 1 offering GPUs within the span: copies move their windows by whole days") {
		t.Errorf("notes %q", w.notes)
	}
}
