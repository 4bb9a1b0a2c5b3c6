package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// nodeCommand is "idlegrid node".
type nodeCommand struct{ env *env }

func (c *nodeCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("node", "Nodes are providers' machines, joined by 'idlegrid agent'.", []subcommand{
		{"ls", "list nodes", func(a []string) error { return c.list(ctx, a) }},
		{"get", "show one node", func(a []string) error { return c.get(ctx, a) }},
		{"reputation", "show a node's reputation: score, level, evidence, advice", func(a []string) error { return c.reputation(ctx, a) }},
		{"hardware", "show a node's attested hardware, changes and challenges", func(a []string) error { return c.hardware(ctx, a) }},
		{"quarantine", "list, add or lift quarantines", func(a []string) error { return c.quarantine(ctx, a) }},
		{"schedule", "show, set or clear when a node is offered (its windows)", func(a []string) error { return c.schedule(ctx, a) }},
	}, args)
}

func (c *nodeCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("node ls", help{
		usage:    "idlegrid node ls [--gpu-model M,…] [--region R,…] [--limit N] [--json]",
		about:    "List nodes, oldest first: a provider sees their own, an admin sees all, and a renter the nodes on offer now (online, not in quarantine), as anyone may see them.",
		examples: "idlegrid node ls\n idlegrid node ls --gpu-model H100-80GB,A100-80GB --region eu-west\n idlegrid node ls --limit 5000 --json",
	})
	r := c.env.remoteFlags(fs)
	var models, regions stringList
	fs.Var(&models, "gpu-model", "only nodes with a GPU of one of these models, e.g. H100-80GB (repeat or comma-separate)")
	fs.Var(&regions, "region", "only nodes in one of these regions, e.g. eu-west (repeat or comma-separate)")
	limit := fs.Int("limit", 0, "at most this many nodes, 1–10000 (default: all of yours; for a renter the server's first 1000)")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	if *limit < 0 || *limit > 10000 {
		return usagef("--limit: %d is out of range; give 1 to 10000 nodes, or leave it out", *limit)
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	nodes, err := cl.ListNodes(ctx, idlegrid.NodeFilter{GPUModels: models, Regions: regions, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(nodes))
	}
	now := time.Now()
	t := newTable(c.env.Out, "ID", "NAME", "STATE", "GPUS", "REGION", "RESIDENCY", "SCHEDULE", "ASK $/GPU-h", "RELIABILITY", "HEARTBEAT")
	for _, n := range nodes {
		t.row(n.ID, n.Name, n.State, gpuSummary(n.GPUs), n.Region, n.Residency, n.Schedule.Mode,
			askSummary(n.Ask), fmt.Sprintf("%.2f", n.Reliability), age(n.LastHeartbeat, now))
	}
	return t.flush()
}

func (c *nodeCommand) get(ctx context.Context, args []string) error {
	fs := c.env.flags("node get", help{
		usage:    "idlegrid node get ID [--json]",
		about:    "Show a node: its GPUs, place, schedule, ask and record. Its provider and admins see all of it; anyone else what the market shows (not its labels, agent version or hardware fingerprints).",
		examples: "idlegrid node get node_abc123",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one node ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	n, err := cl.FindNode(ctx, args[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, n)
	}
	now := time.Now()
	t := newTable(c.env.Out, "ID", n.ID)
	t.row("Name", n.Name)
	t.row("Provider", n.ProviderID)
	t.row("State", n.State)
	if n.Quarantined {
		t.row("Quarantined", "yes: takes no new leases; see 'idlegrid node hardware "+n.ID+"'")
	}
	t.row("GPUs", gpuSummary(n.GPUs))
	t.row("CPU / RAM / disk", fmt.Sprintf("%d cores / %d MB / %d GB", n.CPUCores, n.RAMMB, n.DiskGB))
	t.row("Region", n.Region)
	t.row("Residency", n.Residency)
	t.row("Schedule", scheduleSummary(n.Schedule.Mode, n.Schedule.TimeZone, len(n.Schedule.Weekly), len(n.Schedule.OneOff)))
	if until := n.Schedule.AvailableUntil(now); !until.IsZero() {
		t.row("Available", "now, until "+until.UTC().Format(time.RFC3339))
	} else if next := n.Schedule.NextOpening(now); !next.IsZero() {
		t.row("Available", "next from "+next.UTC().Format(time.RFC3339))
	}
	t.row("Ask", askSummary(n.Ask))
	kinds := make([]string, len(n.Ask.AllowedKinds))
	for i, k := range n.Ask.AllowedKinds {
		kinds[i] = string(k)
	}
	t.row("Allowed kinds", firstNonEmpty(strings.Join(kinds, ", "), "all"))
	t.row("Reliability", fmt.Sprintf("%.3f (%d completed, %d failed)", n.Reliability, n.LeasesCompleted, n.LeasesFailed))
	if n.AgentVersion != "" { // not shown to those who do not own the node
		t.row("Agent", n.AgentVersion)
	}
	t.row("Last heartbeat", fmt.Sprintf("%s (%s ago)", stamp(&n.LastHeartbeat), age(n.LastHeartbeat, now)))
	return t.flush()
}

func scheduleSummary(mode any, tz string, weekly, oneOff int) string {
	s := fmt.Sprint(mode)
	if weekly+oneOff > 0 {
		s += fmt.Sprintf(", %d weekly and %d one-off window(s)", weekly, oneOff)
	}
	if tz != "" {
		s += " in " + tz
	}
	return s
}
