package cli

import (
	"cmp"
	"context"
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

func (c *jobCommand) logs(ctx context.Context, args []string) error {
	fs := c.env.flags("job logs", help{
		usage: "idlegrid job logs ID [-f] [--node NODE_ID]",
		about: `Print the output of the job's latest lease. With -f, keep printing new
lines until the lease ends (or Ctrl-C). A gang runs a lease on each of its
nodes: the output is the first node's (by ID), and --node names another.`,
		examples: "idlegrid job logs job_abc123\n idlegrid job logs job_abc123 -f\n idlegrid job logs job_abc123 --node node_1k8u   # a gang's other node",
	})
	r := c.env.remoteFlags(fs)
	follow := fs.Bool("f", false, "follow: keep printing until the lease ends")
	node := fs.String("node", "", "the node whose lease's output to print, for a gang (default: the first of its nodes, by ID)")
	args, err := fs.parseArgs(args, 1, 1, "one job ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	jobID := args[0]
	var (
		after   int64
		leaseID string
		lost    bool // the server could not be reached, and has not been since
	)
	for {
		done, err := c.logsOnce(ctx, cl, jobID, *node, *follow, &leaseID, &after)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && (!*follow || !transient(err)):
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

// logsOnce prints what the job's latest lease has logged since *after,
// moving to a new lease (*leaseID) when the job was requeued. done: there
// is no more to follow, or not following.
func (c *jobCommand) logsOnce(ctx context.Context, cl *client.Client, jobID, nodeID string, follow bool, leaseID *string, after *int64) (done bool, err error) {
	leases, err := cl.ListLeases(ctx, idlegrid.LeaseFilter{JobID: jobID})
	if err != nil {
		return false, err
	}
	lease, others := latestOn(leases, nodeID)
	if lease == nil && nodeID != "" && len(leases) > 0 {
		return true, usagef("job %s ran on no node %s; its latest run's nodes: %s", jobID, nodeID, strings.Join(others, ", "))
	} else if lease == nil {
		return c.noLease(ctx, cl, jobID, follow)
	}
	if lease.ID != *leaseID { // a requeued job runs on a new lease with its own numbering
		if nodeID == "" && len(others) > 0 {
			fmt.Fprintf(c.env.Err, "%s is a gang: this is the output of node %s; the others': --node %s\n", jobID, lease.NodeID, strings.Join(others, " or --node "))
		}
		*leaseID, *after = lease.ID, 0
	}
	if *after, err = c.printLogs(ctx, cl, lease.ID, *after); err != nil {
		return false, err
	}
	return !follow || lease.State.Terminal(), nil
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

// printLogs prints the lease's lines after seq and returns the last seq printed.
func (c *jobCommand) printLogs(ctx context.Context, cl *client.Client, leaseID string, after int64) (int64, error) {
	const page = 1000
	for {
		lines, err := cl.LeaseLogs(ctx, leaseID, after, page)
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return after, nil
			}
			return after, err
		}
		for _, l := range lines {
			w := c.env.Out
			if l.Stream == "stderr" {
				w = c.env.Err
			}
			fmt.Fprintln(w, l.Text)
			after = l.Seq
		}
		if len(lines) < page {
			return after, nil
		}
	}
}
