package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/idlegrid/idlegrid"
)

// leaseCommand is "idlegrid lease".
type leaseCommand struct{ env *env }

func (c *leaseCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("lease", "A lease is one node's share of a job, at a price locked when it was placed.", []subcommand{
		{"ls", "list leases: a renter's, a provider's nodes', or all", func(a []string) error { return c.list(ctx, a) }},
		{"get", "show a lease and its events", func(a []string) error { return c.get(ctx, a) }},
		{"receipts", "export a lease's signed usage receipts and verify them", func(a []string) error { return c.receipts(ctx, a) }},
	}, args)
}

func (c *leaseCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("lease ls", help{
		usage: "idlegrid lease ls [--node ID] [--job ID] [--state running,…] [--limit N] [--before LEASE_ID] [--json]",
		about: `List leases, newest first: a renter sees their jobs', a provider their
nodes', an admin all. A full page ends with the command for the next one
(--before, the last lease listed).`,
		examples: `idlegrid lease ls --state assigned,running             # what runs now
		idlegrid lease ls --node node_abc123 --limit 20
		idlegrid lease ls --limit 20 --before lease_1k8u7bk86760od68tjkhklaoi   # the next page`,
	})
	r := c.env.remoteFlags(fs)
	var states stringList
	f := idlegrid.LeaseFilter{}
	fs.StringVar(&f.NodeID, "node", "", "only the leases of this node")
	fs.StringVar(&f.JobID, "job", "", "only the leases of this job")
	fs.Var(&states, "state", "only leases in these states: "+leaseStateList)
	fs.IntVar(&f.Limit, "limit", 100, "at most this many leases")
	fs.StringVar(&f.Before, "before", "", "list the leases after this one, newest first: the next page after a page that ended with it")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	} else if err := checkLimit(f.Limit, "leases", 100); err != nil {
		return err
	}
	if f.States, err = parseStates(strings.Join(states, ","), idlegrid.LeaseState.Valid, "lease", leaseStateList); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	leases, err := cl.ListLeases(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(leases))
	}
	if len(leases) == 0 {
		return c.noneListed(f, states)
	}
	nodes := nodeNames{}
	nodes.learn(ctx, cl, leases)
	if err := printLeases(c.env, leases, nodes); err != nil {
		return err
	}
	return nextPage(c.env.Out, "idlegrid lease ls"+leaseFlags(f, states), len(leases), f.Limit, leases[len(leases)-1].ID)
}

// noneListed says that "lease ls" found no lease, and under which
// filters, rather than print a bare header. The server lists none for a
// node or job it does not know, or that is not the caller's, as for one
// without leases.
func (c *leaseCommand) noneListed(f idlegrid.LeaseFilter, states []string) error {
	var err error
	switch flags := leaseFlags(f, states); {
	case f.Before != "":
		_, err = fmt.Fprintf(c.env.Out, "no more leases before %s%s\n", f.Before, flags)
	case flags == "":
		_, err = fmt.Fprintln(c.env.Out, "no leases to list yet")
	case f.NodeID != "" || f.JobID != "":
		_, err = fmt.Fprintf(c.env.Out, "no lease matches%s (check the IDs with 'idlegrid node ls' or 'idlegrid job ls')\n", flags)
	default:
		_, err = fmt.Fprintf(c.env.Out, "no lease matches%s\n", flags)
	}
	return err
}

// leaseStateList names the lease states, for help and errors.
var leaseStateList = func() string {
	names := make([]string, len(idlegrid.LeaseStates))
	for i, s := range idlegrid.LeaseStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}()

// leaseFlags are the filters of f given as flags, for the next page.
func leaseFlags(f idlegrid.LeaseFilter, states []string) string {
	var b strings.Builder
	if f.NodeID != "" {
		b.WriteString(" --node " + f.NodeID)
	}
	if f.JobID != "" {
		b.WriteString(" --job " + f.JobID)
	}
	return b.String() + statesFlag(states)
}

// leaseWithEvents is the --json form of "lease get".
type leaseWithEvents struct {
	*idlegrid.Lease
	Events []*idlegrid.LeaseEvent `json:"events"`
}

func (c *leaseCommand) get(ctx context.Context, args []string) error {
	fs := c.env.flags("lease get", help{
		usage:    "idlegrid lease get ID [--json]",
		about:    "Show a lease: node, GPUs, locked price, escrow hold, charge, and every state change with its reason.",
		examples: "idlegrid lease get lease_abc123\n idlegrid job leases job_abc123   # to find a job's leases",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one lease ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	l, events, err := cl.FindLease(ctx, args[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, leaseWithEvents{Lease: l, Events: nonNil(events)})
	}
	return printLease(c.env.Out, l, events)
}

// printLease shows a lease as a table of fields, then its events.
func printLease(out io.Writer, l *idlegrid.Lease, events []*idlegrid.LeaseEvent) error {
	t := newTable(out, "ID", l.ID)
	t.row("Job", l.JobID)
	t.row("Node", l.NodeID)
	t.row("Provider", l.ProviderID)
	t.row("Attempt", l.Attempt)
	t.row("Tier", l.Tier)
	t.row("GPUs", len(l.GPUUUIDs))
	t.row("Price", perGPUHour(l.PriceMicrosPerGPUHour))
	t.row("Price note", orDash(l.PriceNote))
	t.row("Time limit", seconds(l.LimitSeconds))
	t.row("Hold", l.HoldMicros)
	t.row("Charged", l.ChargedMicros)
	t.row("State", l.StateWord())
	t.row("Reason", orDash(l.Reason))
	t.row("Fault", orDash(string(l.Fault)))
	t.row("Stop asked", orDash(l.StopRequested))
	t.row("Notice", leaseNotice(l))
	t.row("Checkpoint", leaseCheckpoint(l))
	if p := l.Pull; p != nil {
		t.row("Image pull", fmt.Sprintf("%s of %s, moved %s", humanize.IBytes(uint64(p.PulledBytes)), humanize.IBytes(uint64(p.ImageBytes)), stamp(&p.At)))
	}
	if l.StartBy != nil {
		t.row("Start by", stamp(l.StartBy)+" (or it goes back to the queue, to keep the job's deadline, the node's window or another job's reservation)")
	}
	t.row("Started", stamp(l.StartedAt))
	t.row("Ended", stamp(l.EndedAt))
	if err := t.flush(); err != nil {
		return err
	}
	io.WriteString(out, "\nEvents:\n")
	t = newTable(out, "  AT", "FROM", "TO", "REASON")
	for _, ev := range events {
		t.row("  "+ev.At.UTC().Format("2006-01-02T15:04:05.000Z"), orDash(string(ev.From)), ev.To, orDash(ev.Reason))
	}
	return t.flush()
}

// leaseNotice says what notice a bronze lease is guaranteed before it is
// stopped, and when it was given.
func leaseNotice(l *idlegrid.Lease) string {
	if l.NoticeSeconds == 0 {
		return "-"
	}
	s := seconds(l.NoticeSeconds) + " guaranteed"
	if l.NoticeAt != nil {
		s += ", given " + stamp(l.NoticeAt)
	}
	return s
}

// leaseCheckpoint says what the workload last saved and when: a preemption
// loses only the work since, and a requeued job resumes from the reference.
func leaseCheckpoint(l *idlegrid.Lease) string {
	switch {
	case l.CheckpointAt != nil && l.CheckpointRef != "":
		return l.CheckpointRef + ", saved " + stamp(l.CheckpointAt)
	case l.CheckpointAt != nil:
		return "saved " + stamp(l.CheckpointAt)
	case l.CheckpointRef != "":
		return l.CheckpointRef
	}
	return "none reported"
}
