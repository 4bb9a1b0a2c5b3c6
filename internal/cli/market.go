package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// marketCommand is "idlegrid market": the market at a glance.
type marketCommand struct{ env *env }

func (c *marketCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("market", help{
		usage: "idlegrid market [--json]",
		about: `Show the market per GPU model and region: GPUs offered now and free,
queued demand, the share of supply that is leased (fill rate), the latest
clearing price, and a suggested ask per tier for providers.`,
		examples: "idlegrid market\n idlegrid market --json",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	stats, err := cl.Market(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(stats))
	}
	t := newTable(c.env.Out, "MODEL", "REGION", "SUPPLY", "FREE", "QUEUED", "FILL", "LAST PRICE $/GPU-h", "SUGGESTED ASK $/GPU-h")
	for _, s := range stats {
		t.row(s.GPUModel, s.Region, s.SupplyGPUs, s.FreeGPUs, queued(s.QueuedJobs, s.QueuedGPUs),
			fmt.Sprintf("%.0f%%", 100*s.FillRate), lastPrice(s.Prices), tierPrices(s.SuggestedAsk))
	}
	return t.flush()
}

// queued is a cell's queued demand, "2 jobs/10 GPUs", or "-" for none.
func queued(jobs, gpus int) string {
	if jobs == 0 {
		return "-"
	}
	return counted(jobs, "job") + "/" + counted(gpus, "GPU")
}

func lastPrice(ps []wire.PricePoint) string {
	if len(ps) == 0 {
		return "-"
	}
	p := ps[len(ps)-1]
	return fmt.Sprintf("%s (%s)", p.PriceMicrosPerGPUHour, p.Tier)
}

func tierPrices(m map[idlegrid.Tier]idlegrid.Micros) string {
	var parts []string
	for _, t := range idlegrid.Tiers {
		if p, ok := m[t]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", t, p))
		}
	}
	return orDash(strings.Join(parts, " "))
}

// explain is "idlegrid job explain ID".
func (c *jobCommand) explain(ctx context.Context, args []string) error {
	fs := c.env.flags("job explain", help{
		usage: "idlegrid job explain ID [--json]",
		about: `Say why a queued job has not started: how many nodes each constraint
rules out (GPU model, VRAM, too few GPUs, region, residency, window too
short, cap below ask, reliability bar, no free capacity), the cheapest asks the job's cap
would need to beat, and an estimated time to start. A job that runs or has
ended has no wait to explain: it says which, and exits 1.`,
		examples: "idlegrid job explain job_abc123",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one job ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	x, err := cl.Explain(ctx, args[0])
	if idlegrid.ErrorCode(err) == idlegrid.ECONFLICT { // it runs or ended: no wait to explain
		return withHint(err, fmt.Sprintf("see it with 'idlegrid job get %s', and its leases with 'idlegrid job leases %s'", args[0], args[0]))
	} else if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, x)
	}
	return printExplanation(c.env, x)
}

// estimatedStart is the explanation's estimated start in words: a time
// and how it was reckoned, or, with none, the note that says why.
func estimatedStart(x *wire.Explanation) string {
	switch {
	case !x.EstimatedStart.IsZero() && x.EstimateNote != "":
		return x.EstimatedStart.Format(time.RFC3339) + " (" + x.EstimateNote + ")"
	case !x.EstimatedStart.IsZero():
		return x.EstimatedStart.Format(time.RFC3339)
	case x.EstimateNote != "":
		return x.EstimateNote // it says the start is unknown, and why
	}
	return "unknown: no matching node would take it"
}

func printExplanation(e *env, x *wire.Explanation) error {
	fmt.Fprintf(e.Out, "%s: %s\n", x.JobID, x.Summary)
	fmt.Fprintf(e.Out, "%d online nodes; %d could take a share of it now\n", x.Nodes, x.Fits)
	reasons := make([]string, 0, len(x.Rejections))
	for r := range x.Rejections {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(a, b int) bool { return x.Rejections[reasons[a]] > x.Rejections[reasons[b]] })
	if len(reasons) > 0 {
		fmt.Fprintln(e.Out, "\nnodes ruled out:")
		t := newTable(e.Out, "REASON", "NODES")
		for _, r := range reasons {
			t.row(r, x.Rejections[r])
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(x.CheapestAsks) > 0 {
		fmt.Fprintln(e.Out, "\ncheapest asks that match the job's hardware and rules:")
		t := newTable(e.Out, "NODE", "ID", "REGION", "MODEL", "ASK $/GPU-h", "RELIABILITY", "BLOCKED BY")
		for _, q := range x.CheapestAsks {
			t.row(orDash(q.NodeName), q.NodeID, q.Region, q.GPUModel, q.AskMicrosPerGPUHour, fmt.Sprintf("%.2f", q.Reliability), orDash(q.Blocker))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.Out, "\nestimated start: %s\n", estimatedStart(x))
	for _, a := range x.Advice {
		fmt.Fprintf(e.Out, "to start sooner: %s\n", a)
	}
	return nil
}
