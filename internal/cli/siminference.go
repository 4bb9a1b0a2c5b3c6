package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid/internal/infersim"
)

// simInferenceCommand is "idlegrid sim inference": the Azure LLM
// inference trace replayed through the real gateway against simulated
// providers.
type simInferenceCommand struct{ env *env }

func (c *simInferenceCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("sim inference", help{
		usage: "idlegrid sim inference [--traces code,conv] [--trace-dir DIR] [--start D] [--duration D | --requests N] [--speedup X] [--service-speedup X] [--stream-share F] [--fault-scale F] [--seed S] [--json]",
		about: `Replay the Azure LLM inference trace of 2023 (Splitwise; two files, code and
conv, of TIMESTAMP,ContextTokens,GeneratedTokens) through the real
coordinator and its OpenAI-compatible gateway (server.Open on SQLite in a
temporary folder, real agents on loopback sessions) against simulated
providers: model servers whose time to first token and tokens per second
follow their GPU (H100, A100, RTX 4090; an 8B model, prefill bound by
FLOP/s, decode by memory bandwidth), which report the trace's token counts
as usage and fail a share of requests (500, 429, stall, dropped
connection). Six providers in four regions, at different prices.

Each row is sent at its arrival time divided by --speedup, whatever the
others are doing (open loop): --speedup 10 offers ten times the trace's
load; the simulated GPUs keep their speed. Report latency and time to
first token (p50/p95/p99), what the gateway added over the model server,
failovers, breaker trips, errors, and the money from the ledger: $ per
million tokens paid by each renter, each provider's earnings, the fee.
docs/gateway.md, "Replaying the Azure trace", states the model. The same
seed gives the same requests, streams and fault draws; latencies and the
provider each request lands on follow the wall clock.`,
		examples: `idlegrid sim inference --duration 5m
		idlegrid sim inference --start 10m --duration 20m --speedup 4 --json
		idlegrid sim inference --traces conv --requests 500 --fault-scale 0
		idlegrid sim inference --traces mine:trace.csv --requests 100 --service-speedup 100`,
	})
	var (
		cfg                 infersim.Config
		traces, traceDir    string
		slice               infersim.Slice
		asJSON, quiet       bool
		faultScale, streams float64
	)
	fs.StringVar(&traces, "traces", "code,conv", "traces to replay together, each as its own renter and model: NAME (AzureLLMInferenceTrace_NAME.csv in --trace-dir) or NAME:PATH")
	fs.StringVar(&traceDir, "trace-dir", "", "folder of AzureLLMInferenceTrace_<name>.csv (default DATA/azure-llm-2023)")
	fs.DurationVar(&slice.Start, "start", 0, "skip this much of the trace from its first request")
	fs.DurationVar(&slice.Duration, "duration", 0, "replay the requests that arrive within this much trace time (0: to the end)")
	fs.IntVar(&slice.Requests, "requests", 0, "replay at most this many requests (0: all in the slice)")
	fs.Float64Var(&cfg.Speedup, "speedup", 1, "divide arrival times by this: the offered load times this")
	fs.Float64Var(&streams, "stream-share", 0.5, "share of requests sent with stream: true")
	fs.Float64Var(&faultScale, "fault-scale", 1, "multiply every provider's fault shares (0: no faults)")
	fs.Float64Var(&cfg.ServiceSpeedup, "service-speedup", 1, "divide the simulated model servers' times, and the gateway's timeouts, by this (to check the wiring fast)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed for the streaming choice and the fault draws")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&quiet, "quiet", false, "no progress on standard error")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	if cfg.Speedup <= 0 || cfg.ServiceSpeedup <= 0 || streams < 0 || streams > 1 || faultScale < 0 || slice.Start < 0 || slice.Duration < 0 || slice.Requests < 0 {
		return usagef("--speedup and --service-speedup must be above 0, --stream-share between 0 and 1, and --fault-scale, --start, --duration and --requests not negative")
	}
	cfg.StreamShare, cfg.FaultScale = negativeForNone(streams), negativeForNone(faultScale)
	if traceDir == "" {
		traceDir = filepath.Join((&traceFlags{e: c.env}).dataDir(), "azure-llm-2023")
	}
	var all [][]infersim.Request
	for _, name := range strings.Split(traces, ",") {
		rows, err := c.readTrace(traceDir, strings.TrimSpace(name))
		if err != nil {
			return err
		}
		all = append(all, rows)
	}
	cfg.Requests = infersim.Merge(slice, all...)
	if !quiet {
		cfg.Progress = c.env.Err
		fmt.Fprintf(c.env.Err, "infersim: replaying %d requests at speedup %g\n", len(cfg.Requests), cfg.Speedup)
	}
	r, err := infersim.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(c.env.Out, r)
	}
	return r.WriteTable(c.env.Out)
}

// negativeForNone turns a flag's 0 into the config's "none".
func negativeForNone(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

func (c *simInferenceCommand) readTrace(dir, spec string) ([]infersim.Request, error) {
	name, path, hasPath := strings.Cut(spec, ":")
	if name == "" || (hasPath && path == "") {
		return nil, usagef("--traces wants NAME or NAME:PATH, got %q", spec)
	}
	if !hasPath {
		path = filepath.Join(dir, "AzureLLMInferenceTrace_"+name+".csv")
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, withHint(fmt.Errorf("no trace at %s", path),
			"give --trace-dir or NAME:PATH in --traces, or put the trace under ../shared/data/azure-llm-2023 (or $IDLEGRID_TRACE_DATA/azure-llm-2023):\n"+
				"    github.com/Azure/AzurePublicDataset, data/AzureLLMInferenceTrace_code.csv and _conv.csv")
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	began := time.Now()
	rows, err := infersim.ParseTrace(f, name)
	if err != nil {
		return nil, err
	}
	if time.Since(began) > time.Second {
		fmt.Fprintf(c.env.Err, "infersim: read %s in %s\n", path, time.Since(began).Round(time.Millisecond))
	}
	return rows, nil
}
