package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// logPollInterval is how often "job logs -f" asks for new lines.
const logPollInterval = time.Second

// maxLogTail is the most lines --tail may ask for: the server's bound on
// one read of a lease's output.
const maxLogTail = 10000

// logsFollow is one "job logs": its flags, and how far it has printed.
type logsFollow struct {
	jobID, nodeID string
	follow        bool
	tail          int  // print only the last tail lines of the first lease (0: all)
	timestamps    bool // each line after its time
	json          bool // each line as a line of JSON (logLine)

	leaseID string // the lease being printed
	after   int64  // the last line of it printed
}

func (c *jobCommand) logs(ctx context.Context, args []string) error {
	fs := c.env.flags("job logs", help{
		usage: "idlegrid job logs ID [-f] [--tail N] [--timestamps] [--json] [--node NODE_ID]",
		about: `Print the output of the job's latest lease: stdout's lines on stdout,
stderr's on stderr. With -f, keep printing new lines until the lease ends
(or Ctrl-C), and go on to the next lease when the job is requeued. A gang
runs a lease on each of its nodes: the output is the first node's (by ID),
and --node names another. A lease keeps its latest 100,000 lines.`,
		examples: "idlegrid job logs job_abc123\n idlegrid job logs job_abc123 --tail 50 -f   # the last 50 lines, then new ones\n idlegrid job logs job_abc123 --timestamps\n idlegrid job logs job_abc123 --json | jq -r 'select(.stream == \"stderr\") | .text'\n idlegrid job logs job_abc123 --node node_1k8u   # a gang's other node",
	})
	r := c.env.remoteFlags(fs)
	var f logsFollow
	fs.BoolVar(&f.follow, "f", false, "follow: keep printing until the lease ends")
	fs.IntVar(&f.tail, "tail", 0, fmt.Sprintf("print only the last N lines (1 to %d; default all)", maxLogTail))
	fs.BoolVar(&f.timestamps, "timestamps", false, "print each line after the time the node read it (RFC 3339, UTC)")
	fs.BoolVar(&f.json, "json", false, "print each line as a line of JSON on stdout: {lease_id, node_id, seq, at, stream, text}")
	fs.StringVar(&f.nodeID, "node", "", "the node whose lease's output to print, for a gang (default: the first of its nodes, by ID)")
	args, err := fs.parseArgs(args, 1, 1, "one job ID")
	if err != nil {
		return err
	}
	if f.tail < 0 || f.tail > maxLogTail {
		return usagef("--tail must be between 1 and %d lines, got %d; leave it out for every line", maxLogTail, f.tail)
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	f.jobID = args[0]
	return c.followLogs(ctx, cl, &f)
}

// followLogs prints the job's logs, and with -f goes on until its lease
// ends, through a server it cannot reach for a while.
func (c *jobCommand) followLogs(ctx context.Context, cl *client.Client, f *logsFollow) error {
	lost := false // the server could not be reached, and has not been since
	for {
		done, err := c.logsOnce(ctx, cl, f)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && (!f.follow || !transient(err)):
			return err
		case err != nil:
			// As "job watch" does: a server away for a while (restarting,
			// the network down) is said once, and asked again.
			if !lost {
				fmt.Fprintf(c.env.Err, "%s  cannot reach the server (%s); still trying (Ctrl-C stops)\n", time.Now().Format("15:04:05"), errorText(err))
			}
			lost = true
		case lost:
			fmt.Fprintf(c.env.Err, "%s  in contact with the server again\n", time.Now().Format("15:04:05"))
			lost = false
		}
		if done && err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(logPollInterval):
		}
	}
}

// logsOnce prints what the job's latest lease has logged since f.after,
// moving to a new lease when the job was requeued. done: there is no more
// to follow, or not following.
func (c *jobCommand) logsOnce(ctx context.Context, cl *client.Client, f *logsFollow) (done bool, err error) {
	leases, err := cl.ListLeases(ctx, idlegrid.LeaseFilter{JobID: f.jobID})
	if err != nil {
		return false, err
	}
	lease, others := latestOn(leases, f.nodeID)
	if lease == nil && f.nodeID != "" && len(leases) > 0 {
		return true, usagef("job %s ran on no node %s; its latest run's nodes: %s", f.jobID, f.nodeID, strings.Join(others, ", "))
	} else if lease == nil {
		return c.noLease(ctx, cl, f.jobID, f.follow)
	}
	if lease.ID != f.leaseID { // a requeued job runs on a new lease with its own numbering
		if f.nodeID == "" && len(others) > 0 {
			fmt.Fprintf(c.env.Err, "%s is a gang: this is the output of node %s; the others': --node %s\n", f.jobID, lease.NodeID, strings.Join(others, " or --node "))
		}
		first := f.leaseID == ""
		f.leaseID, f.after = lease.ID, 0
		if first && f.tail > 0 {
			if err := c.printTail(ctx, cl, lease, f); err != nil {
				f.leaseID = "" // the tail again at the next try
				return false, err
			}
		}
	}
	if err = c.printLogs(ctx, cl, lease, f); err != nil {
		return false, err
	}
	return !f.follow || lease.State.Terminal(), nil
}

// noLease says why the job has no logs, when it has no lease: it is not
// there, it ended before it was placed, or (done only when not following)
// it waits to be placed.
func (c *jobCommand) noLease(ctx context.Context, cl *client.Client, jobID string, follow bool) (done bool, err error) {
	j, err := cl.FindJob(ctx, jobID)
	switch {
	case err != nil:
		return true, err
	case j.State.Terminal():
		fmt.Fprintf(c.env.Err, "%s never ran, so it has no logs: it ended %s before it was placed (%s)\n", j.ID, j.State, orDash(j.Reason))
		return true, nil
	case !follow:
		fmt.Fprintf(c.env.Err, "%s has no lease yet; it has not been placed (why it waits: 'idlegrid job explain %s'; -f waits for its logs)\n", j.ID, j.ID)
		return true, nil
	}
	return false, nil
}

// latestOn returns, of a job's leases, the one of its latest run on node
// nodeID, or when nodeID is "" on the first of that run's nodes by ID
// (a gang runs one lease on each), and the run's other nodes; nil when
// none is.
func latestOn(leases []*idlegrid.Lease, nodeID string) (*idlegrid.Lease, []string) {
	attempt := 0
	for _, l := range leases {
		attempt = max(attempt, l.Attempt)
	}
	var run []*idlegrid.Lease
	for _, l := range leases {
		if l.Attempt == attempt {
			run = append(run, l)
		}
	}
	slices.SortFunc(run, func(a, b *idlegrid.Lease) int {
		return cmp.Or(strings.Compare(a.NodeID, b.NodeID), b.CreatedAt.Compare(a.CreatedAt))
	})
	var pick *idlegrid.Lease
	var others []string
	for _, l := range run {
		switch {
		case pick == nil && (nodeID == "" || l.NodeID == nodeID):
			pick = l
		case pick == nil || l.NodeID != pick.NodeID:
			others = append(others, l.NodeID)
		}
	}
	return pick, others
}

// printLogs prints the lease's lines after f.after, and moves f.after to
// the last one printed.
func (c *jobCommand) printLogs(ctx context.Context, cl *client.Client, lease *idlegrid.Lease, f *logsFollow) error {
	const page = 1000
	for {
		lines, err := cl.LeaseLogs(ctx, lease.ID, f.after, page)
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			return err
		}
		if err := c.printLines(lease, lines, f); err != nil {
			return err
		}
		if len(lines) < page {
			return nil
		}
	}
}

// printTail prints the lease's last f.tail lines, and moves f.after to the
// last one.
func (c *jobCommand) printTail(ctx context.Context, cl *client.Client, lease *idlegrid.Lease, f *logsFollow) error {
	lines, err := cl.LeaseLogTail(ctx, lease.ID, f.tail)
	if err != nil {
		return err
	}
	return c.printLines(lease, lines, f)
}

// logLine is a line of "job logs --json".
type logLine struct {
	LeaseID string `json:"lease_id"`
	NodeID  string `json:"node_id"`
	idlegrid.LogLine
}

// printLines prints lines of the lease's output as f asks, and moves
// f.after to the last.
func (c *jobCommand) printLines(lease *idlegrid.Lease, lines []idlegrid.LogLine, f *logsFollow) error {
	enc := json.NewEncoder(c.env.Out)
	for _, l := range lines {
		if err := c.printLine(enc, lease, l, f); err != nil {
			return err
		}
		f.after = l.Seq
	}
	return nil
}

// printLine prints one line: as JSON on stdout, or its text on its own
// stream, after its time when f asks.
func (c *jobCommand) printLine(enc *json.Encoder, lease *idlegrid.Lease, l idlegrid.LogLine, f *logsFollow) error {
	if f.json {
		return enc.Encode(logLine{LeaseID: lease.ID, NodeID: lease.NodeID, LogLine: l})
	}
	w, text := c.env.Out, l.Text
	if l.Stream == "stderr" {
		w = c.env.Err
	}
	if f.timestamps {
		text = l.At.UTC().Format(time.RFC3339Nano) + " " + text
	}
	_, err := fmt.Fprintln(w, text)
	return err
}
