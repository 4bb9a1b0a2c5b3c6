package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// drain is "idlegrid node drain": maintenance without breaking a lease.
func (c *nodeCommand) drain(ctx context.Context, args []string) error {
	fs := c.env.flags("node drain", help{
		usage: "idlegrid node drain ID|NAME [--wait [--every D] [--timeout D]] [--undo] [--json]",
		about: `Drain a node before maintenance: it takes no new leases and holds no
reservations, its bronze leases get their notice (and their jobs go back
to the queue, from their checkpoints), and its gold and silver leases run
to their end. The node stays drained, whatever its agent publishes, until
--undo. With --wait it follows the node until no lease is left on it, and
says when it is safe to stop the agent. Its provider and admins may drain
a node.`,
		examples: `idlegrid node drain node_abc123 --wait     # then stop the agent, update, reboot
		idlegrid node drain node_abc123 --undo     # offer it again`,
	})
	r := c.env.remoteFlags(fs)
	undo := fs.Bool("undo", false, "end the drain: the node takes work again")
	wait := fs.Bool("wait", false, "follow the node until no lease is left on it")
	every := fs.Duration("every", 2*time.Second, "with --wait, how often to look (at least 500ms)")
	timeout := fs.Duration("timeout", 0, "with --wait, stop following after this long (default: until it is empty)")
	asJSON := fs.Bool("json", false, "print the node as JSON")
	args, err := fs.parseArgs(args, 1, 1, "one node: its ID or its name")
	if err != nil {
		return err
	}
	switch {
	case *undo && *wait:
		return usagef("--wait follows a drain; it does not go with --undo")
	case *wait && *every < 500*time.Millisecond:
		return usagef("--every must be at least 500ms, got %s", *every)
	case *timeout < 0:
		return usagef("--timeout must not be negative, got %s", *timeout)
	}
	cl, id, err := r.nodeClient(ctx, args[0])
	if err != nil {
		return err
	}
	n, err := cl.DrainNode(ctx, id, !*undo)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := printJSON(c.env.Out, n); err != nil {
			return err
		}
	} else if *undo {
		fmt.Fprintf(c.env.Out, "%s (%s) is drained no more: it takes new leases again\n", n.Name, n.ID)
	} else {
		fmt.Fprintf(c.env.Out, "%s (%s) draining since %s: no new leases; bronze leases get their notice, gold and silver run to their end\n",
			n.Name, n.ID, stamp(n.DrainingSince))
	}
	if !*wait {
		return nil
	}
	return c.followDrain(ctx, cl, n, *every, *timeout)
}

// followDrain says what is left on the node whenever it changes, until
// nothing is or timeout (0: none) has passed.
func (c *nodeCommand) followDrain(ctx context.Context, cl *client.Client, n *idlegrid.Node, every, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	said := ""
	for {
		leases, err := cl.ListLeases(ctx, idlegrid.LeaseFilter{NodeID: n.ID, States: []idlegrid.LeaseState{idlegrid.LeaseAssigned, idlegrid.LeaseRunning}})
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err == nil && len(leases) == 0 {
			fmt.Fprintf(c.env.Out, "%s  %s is empty: no lease is left on it; stop its agent when you like ('idlegrid node drain %s --undo' offers it again)\n",
				time.Now().Format("15:04:05"), n.Name, n.ID)
			return nil
		}
		if left := leftOn(leases); err == nil && left != said {
			fmt.Fprintf(c.env.Out, "%s  %s\n", time.Now().Format("15:04:05"), left)
			said = left
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return withHint(fmt.Errorf("%s still holds leases after %s", n.Name, timeout), "it stays drained; wait longer with 'idlegrid node drain "+n.ID+" --wait'")
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// leftOn says which leases are left on a draining node and when each ends
// at the latest: its notice's end, or its time limit.
func leftOn(leases []*idlegrid.Lease) string {
	parts := make([]string, 0, len(leases))
	for _, l := range leases {
		end := "not started yet"
		if l.StopRequested != "" && l.NoticeAt != nil {
			end = "stops by " + l.NoticeAt.Add(time.Duration(l.NoticeSeconds)*time.Second).UTC().Format(time.RFC3339)
		} else if l.StartedAt != nil {
			end = "ends by " + l.StartedAt.Add(time.Duration(l.LimitSeconds)*time.Second).UTC().Format(time.RFC3339)
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", l.Tier, l.ID, end))
	}
	noun := "leases"
	if len(leases) == 1 {
		noun = "lease"
	}
	return fmt.Sprintf("%d %s left: %s", len(leases), noun, strings.Join(parts, ", "))
}

// nodeState is a node's state as listings show it, with a drain.
func nodeState(n *idlegrid.Node) string {
	if n.DrainingSince != nil {
		return string(n.State) + ", draining"
	}
	return string(n.State)
}

func (c *nodeCommand) retire(ctx context.Context, args []string) error {
	fs := c.env.flags("node retire", help{
		usage: "idlegrid node retire ID|NAME [--yes] [--json]",
		about: `Retire a node for good: a machine given up, or one whose node key may have
leaked. Its key is refused from now on, whoever holds it; its live leases
end as the node's failure and their jobs go back to the queue. It cannot
be undone: a machine that is to serve again joins as a new node, with a
new key ('idlegrid agent' with a fresh data dir and a join token). To stop
a node for maintenance, drain it instead. Its provider and admins may
retire a node. It retires only once you answer y on a terminal, or with
--yes; without either it retires nothing and exits 2. Scripts give --yes.`,
		examples: "idlegrid node retire node_abc123\n idlegrid node retire node_abc123 --yes   # from a script",
	})
	r := c.env.remoteFlags(fs)
	yes := fs.Bool("yes", false, "retire without asking")
	asJSON := fs.Bool("json", false, "print the node as JSON")
	args, err := fs.parseArgs(args, 1, 1, "one node: its ID or its name")
	if err != nil {
		return err
	}
	cl, id, err := r.nodeClient(ctx, args[0])
	if err != nil {
		return err
	}
	if !*yes {
		if err := c.confirmRetire(ctx, cl, id); err != nil {
			return err
		}
	}
	n, err := cl.RetireNode(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, n)
	}
	fmt.Fprintf(c.env.Out, "node %s (%s) is retired: its key is refused from now on, and its leases have ended, their jobs requeued\n", n.ID, n.Name)
	return nil
}

// confirmRetire says, on stderr, what retiring node id would do, and asks
// on a terminal whether to; elsewhere it retires nothing without --yes.
func (c *nodeCommand) confirmRetire(ctx context.Context, cl *client.Client, id string) error {
	n, err := cl.FindNode(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.env.Err, "node %s (%s, %s): retiring it refuses its key for ever and ends its live leases, their jobs requeued; "+
		"it cannot be undone. To stop it for maintenance, drain it instead: idlegrid node drain %s\n", n.ID, n.Name, n.State, n.ID)
	return c.env.confirm("retire node "+n.ID+"?",
		fmt.Sprintf("retired nothing: retire node %s with --yes (idlegrid node retire %s --yes), or drain it (idlegrid node drain %s)", n.ID, n.ID, n.ID),
		"retired nothing")
}
