package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// nodeCommand is "idlegrid node".
type nodeCommand struct{ env *env }

func (c *nodeCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("node", "Nodes are providers' machines, joined by 'idlegrid agent'.", []subcommand{
		{"ls", "list nodes", func(a []string) error { return c.list(ctx, a) }},
		{"get", "show one node", func(a []string) error { return c.get(ctx, a) }},
		{"reputation", "show a node's reputation: score, level, evidence, advice", func(a []string) error { return c.reputation(ctx, a) }},
		{"hardware", "show a node's attested hardware, changes and challenges", func(a []string) error { return c.hardware(ctx, a) }},
		{"challenges", "list a node's hardware challenges, a page at a time", func(a []string) error { return c.challenges(ctx, a) }},
		{"quarantine", "list, add or lift quarantines", func(a []string) error { return c.quarantine(ctx, a) }},
		{"schedule", "show, set or clear when a node is offered (its windows)", func(a []string) error { return c.schedule(ctx, a) }},
		{"drain", "take a node out of the market for maintenance, and follow it until it is empty", func(a []string) error { return c.drain(ctx, a) }},
		{"retire", "take a node out of the market for good, refusing its key (a machine given up, or a key leaked)", func(a []string) error { return c.retire(ctx, a) }},
	}, args)
}

func (c *nodeCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("node ls", help{
		usage: "idlegrid node ls [--name N] [--state S,…] [--gpu-model M,…] [--region R,…] [--min-gpus N] [--min-vram-mb MB] [--min-level N] [--min-free-gpus N] [--tier T] [--max-price P] [--sort S] [--limit N] [--after ID] [--json]",
		about: `List nodes: a provider sees their own, an admin sees all, and a renter the
nodes on offer now (online, not in quarantine), as anyone may see them.
Oldest first, unless --sort says otherwise. A price is a tier's floor per
GPU-hour, before any time-of-day multiplier; --max-price and --sort price
read silver's unless --tier names another. FREE is how many GPUs a job
could take now (window open, no lease holding them); --min-free-gpus
keeps the nodes with at least that many. --state keeps those online,
offline (the agent stopped and said so), lost (it went silent) or
retired. A page holds 1000 nodes unless --limit says; a full page ends
with the command for the next, which --after the last node's ID asks
for.`,
		examples: `idlegrid node ls
 idlegrid node ls --gpu-model H100-80GB,A100-80GB --region eu-west
 idlegrid node ls --min-vram-mb 40960 --min-gpus 4 --tier bronze --max-price 1.20 --sort price
 idlegrid node ls --gpu-model H100-80GB --min-free-gpus 8   # eight H100s free on one node now
 idlegrid node ls --min-level 2 --sort price                 # the nodes a job with --min-trust-level 2 may run on
 idlegrid node ls --name barn-1                               # the nodes named so (several providers may use a name)
 idlegrid node ls --state offline,lost                        # the nodes not serving now: stopped, or gone silent
 idlegrid node ls --limit 5000 --json`,
	})
	r := c.env.remoteFlags(fs)
	var (
		models, regions stringList
		states          stringList
		f               idlegrid.NodeFilter
		maxPrice        priceFlag
		tier, sort      string
	)
	fs.StringVar(&f.Name, "name", "", "only nodes of this name, as their owners wrote it, e.g. barn-1")
	fs.Var(&states, "state", "only nodes in one of these states: online, offline, lost or retired (repeat or comma-separate)")
	fs.Var(&models, "gpu-model", "only nodes with a GPU of one of these models, e.g. H100-80GB (repeat or comma-separate)")
	fs.Var(&regions, "region", "only nodes in one of these regions, e.g. eu-west (repeat or comma-separate)")
	fs.IntVar(&f.MinGPUs, "min-gpus", 0, "only nodes with at least this many GPUs")
	fs.IntVar(&f.MinVRAMMB, "min-vram-mb", 0, "only nodes with a GPU of at least this much memory, in MB, e.g. 40960")
	fs.IntVar(&f.MinLevel, "min-level", 0, "only nodes at this trust level or above, as a job's --min-trust-level takes them, e.g. 1")
	fs.IntVar(&f.MinFreeGPUs, "min-free-gpus", 0, "only nodes with at least this many GPUs free now, e.g. 4")
	fs.StringVar(&tier, "tier", "", "only nodes that sell this tier: gold, silver or bronze")
	fs.Var(&maxPrice, "max-price", "only nodes whose floor for the tier is at most this per GPU-hour, e.g. 1.20")
	fs.StringVar(&sort, "sort", "", "order: oldest (the default), price (cheapest first) or reliability (most reliable first)")
	fs.IntVar(&f.Limit, "limit", defaultNodePage, "at most this many nodes, 1–10000")
	fs.StringVar(&f.After, "after", "", "the nodes after this one, the last of the page before")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	f.GPUModels, f.Regions, f.MaxFloor = models, regions, maxPrice.m
	f.Tier, f.Sort = idlegrid.Tier(tier), idlegrid.NodeSort(sort)
	if f.States, err = parseStates(strings.Join(states, ","), idlegrid.NodeState.Valid, "node", "online, offline, lost or retired"); err != nil {
		return err
	}
	if err := checkNodeSearch(f); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	found, err := cl.SearchNodes(ctx, f)
	if err != nil {
		return err
	}
	rows := make([]nodeRow, len(found.Nodes))
	for i, n := range found.Nodes {
		rows[i].Node = n
		if free, ok := found.FreeGPUs[n.ID]; ok {
			rows[i].FreeGPUs = &free
		}
	}
	if *asJSON {
		return printJSON(c.env.Out, rows)
	}
	if len(rows) == 0 {
		c.noneListed(ctx, cl, f, nodeFlags(f, tier, maxPrice))
		return nil
	}
	now := time.Now()
	t := newTable(c.env.Out, "ID", "NAME", "STATE", "GPUS", "FREE", "REGION", "RESIDENCY", "SCHEDULE", "ASK $/GPU-h", "RELIABILITY", "LEVEL", "HEARTBEAT")
	for _, r := range rows {
		n := r.Node
		t.row(n.ID, n.Name, nodeState(n), gpuSummary(n.GPUs), r.free(), n.Region, n.Residency, n.Schedule.Mode,
			askSummary(n.Ask), fmt.Sprintf("%.2f", n.Reliability), strconv.Itoa(n.Level), age(n.LastHeartbeat, now))
	}
	if err := t.flush(); err != nil || len(rows) == 0 {
		return err
	}
	return nextPageAfter(c.env.Out, "idlegrid node ls"+nodeFlags(f, tier, maxPrice), len(rows), f.Limit, rows[len(rows)-1].ID)
}

// noneListed says why "node ls" listed no node, rather than a bare
// header: no node matched the filters (flags, as given), with the GPU
// models the market has when a model was asked for, since one misnamed
// ("H100" for H100-80GB) matches none.
func (c *nodeCommand) noneListed(ctx context.Context, cl *client.Client, f idlegrid.NodeFilter, flags string) {
	switch {
	case f.After != "":
		fmt.Fprintf(c.env.Out, "no more nodes after %s%s\n", f.After, flags)
		return
	case flags == "":
		fmt.Fprintln(c.env.Out, "no nodes to list: none you may see has joined, or none is online (providers join one with 'idlegrid agent init')")
		return
	}
	fmt.Fprintf(c.env.Out, "no node matches%s\n", flags)
	if len(f.GPUModels) == 0 && len(f.Regions) == 0 {
		return
	}
	stats, err := cl.Market(ctx)
	if err != nil {
		return
	}
	// Each list only when a value given is none of it: a misnamed one.
	models := offeredIn(stats, func(st wire.MarketStat) string { return st.GPUModel })
	if len(models) > 0 && notAllIn(f.GPUModels, models) {
		fmt.Fprintf(c.env.Out, "the GPU models in the market now: %s (named in full, e.g. --gpu-model %s)%s\n", strings.Join(models, ", "), models[0], meantFlag("gpu-model", f.GPUModels, models))
	} else if len(models) == 0 && len(f.GPUModels) > 0 {
		fmt.Fprintln(c.env.Out, "no node is in the market now, of any GPU model")
	}
	if regions := offeredIn(stats, func(st wire.MarketStat) string { return st.Region }); len(regions) > 0 && notAllIn(f.Regions, regions) {
		fmt.Fprintf(c.env.Out, "the regions in the market now: %s%s\n", strings.Join(regions, ", "), meantFlag("region", f.Regions, regions))
	}
}

// notAllIn reports whether one of given is not in offered.
func notAllIn(given, offered []string) bool {
	return slices.ContainsFunc(given, func(g string) bool { return !slices.Contains(offered, g) })
}

// meantFlag is "; did you mean --flag X?" for the values offered that
// those given seem to mean: the same but for case ("rtx4090"), the start
// of one ("eu" for eu-west, "H100" for H100-80GB), or a part of one
// ("4090" for RTX4090); "" when none does, or a value given is offered.
func meantFlag(flag string, given, offered []string) string {
	var meant []string
	for _, g := range given {
		if slices.Contains(offered, g) {
			return ""
		}
		for _, o := range offered {
			if strings.Contains(strings.ToLower(o), strings.ToLower(g)) && !slices.Contains(meant, o) {
				meant = append(meant, o)
			}
		}
	}
	if len(meant) == 0 {
		return ""
	}
	return "; did you mean --" + flag + " " + strings.Join(meant, ",") + "?"
}

// defaultNodePage is how many nodes "node ls" lists unless told.
const defaultNodePage = 1000

// nodeFlags are the flags of "node ls" that f and the flags tier and price
// stand for, for the command that lists the next page.
func nodeFlags(f idlegrid.NodeFilter, tier string, price priceFlag) string {
	var b strings.Builder
	for _, fl := range []struct {
		name string
		set  bool
		v    string
	}{
		{"--name", f.Name != "", f.Name},
		{"--state", len(f.States) > 0, joinStates(f.States)},
		{"--gpu-model", len(f.GPUModels) > 0, strings.Join(f.GPUModels, ",")},
		{"--region", len(f.Regions) > 0, strings.Join(f.Regions, ",")},
		{"--min-gpus", f.MinGPUs > 0, strconv.Itoa(f.MinGPUs)},
		{"--min-vram-mb", f.MinVRAMMB > 0, strconv.Itoa(f.MinVRAMMB)},
		{"--min-level", f.MinLevel > 0, strconv.Itoa(f.MinLevel)},
		{"--min-free-gpus", f.MinFreeGPUs > 0, strconv.Itoa(f.MinFreeGPUs)},
		{"--tier", tier != "", tier},
		{"--max-price", price.m > 0, price.m.String()},
		{"--sort", f.Sort != "", string(f.Sort)},
	} {
		if fl.set {
			b.WriteString(" " + fl.name + " " + fl.v)
		}
	}
	return b.String()
}

// joinStates is states comma-separated, as --state takes them.
func joinStates(states []idlegrid.NodeState) string {
	s := make([]string, len(states))
	for i, x := range states {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}

// nodeRow is a node as "node ls" lists it: the node, and how many of its
// GPUs a job could take now (nil: the market does not hold the node now).
type nodeRow struct {
	*idlegrid.Node
	FreeGPUs *int `json:"free_gpus,omitempty"`
}

func (r nodeRow) free() string {
	if r.FreeGPUs == nil {
		return "-"
	}
	return strconv.Itoa(*r.FreeGPUs)
}

// checkNodeSearch refuses the flags of "node ls" that no server would
// take, saying what to write instead.
func checkNodeSearch(f idlegrid.NodeFilter) error {
	switch {
	case f.Name != "" && !idlegrid.ValidNodeName(f.Name):
		return usagef("--name: %q is not a node's name; names are 1-63 letters, digits, '.', '_' or '-'", f.Name)
	case f.Limit < 1 || f.Limit > 10000:
		return usagef("--limit: %d is out of range; give 1 to 10000 nodes, or leave it out for %d", f.Limit, defaultNodePage)
	case f.MinGPUs < 0:
		return usagef("--min-gpus: %d is negative; give a number of GPUs, e.g. 4", f.MinGPUs)
	case f.MinVRAMMB < 0:
		return usagef("--min-vram-mb: %d is negative; give megabytes, e.g. 40960", f.MinVRAMMB)
	case f.MinLevel < 0 || f.MinLevel > idlegrid.MaxTrustLevel:
		return usagef("--min-level: %d is out of range; give a trust level from 1 to %d, or leave it out", f.MinLevel, idlegrid.MaxTrustLevel)
	case f.MinFreeGPUs < 0 || f.MinFreeGPUs > 64:
		return usagef("--min-free-gpus: %d is out of range; give 1 to 64 GPUs, e.g. 4, or leave it out", f.MinFreeGPUs)
	case f.Tier != "" && !f.Tier.Valid():
		return usagef("--tier: %q is not a tier; give gold, silver or bronze", f.Tier)
	case f.Sort != "" && !slices.Contains(idlegrid.NodeSorts, f.Sort):
		return usagef("--sort: %q is not an order; give oldest, price or reliability", f.Sort)
	}
	return nil
}

func (c *nodeCommand) get(ctx context.Context, args []string) error {
	fs := c.env.flags("node get", help{
		usage:    "idlegrid node get ID|NAME [--json]",
		about:    "Show a node: its GPUs, place, schedule, ask and record. Its provider and admins see all of it; anyone else what the market shows (not its labels, agent version or hardware fingerprints).",
		examples: "idlegrid node get node_abc123",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one node: its ID or its name")
	if err != nil {
		return err
	}
	cl, id, err := r.nodeClient(ctx, args[0])
	if err != nil {
		return err
	}
	n, err := cl.FindNode(ctx, id)
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
	if n.DrainingSince != nil {
		t.row("Draining", "since "+stamp(n.DrainingSince)+": takes no new leases; 'idlegrid node drain "+n.ID+" --undo' ends it")
	}
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
	if len(n.Models) > 0 { // the models its agent advertises now: those its model servers answer for
		t.row("Models", modelsSummary(n.Models))
	}
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
