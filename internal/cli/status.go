package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// statusCommand is "idlegrid status": the market at a glance, for its
// operators, as idlegrid dev's live summary shows it (summaryLines).
type statusCommand struct{ env *env }

func (c *statusCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("status", help{
		usage: "idlegrid status [--watch [--every D]] [--json]",
		about: `Show the market at a glance (admins): jobs by state, GPUs busy on the
online nodes, nodes by state, and the money: what renters spent, what
providers earned and the platform's fees kept, what upheld disputes
refunded, and what escrow holds now. --watch follows it until Ctrl-C,
redrawn in place on a terminal, a line a look elsewhere (with --json, an
object a line).`,
		examples: "idlegrid status\n\t\tidlegrid status --watch --every 10s\n\t\tidlegrid status --json",
	})
	r := c.env.remoteFlags(fs)
	watch := fs.Bool("watch", false, "follow the market until Ctrl-C")
	every := fs.Duration("every", 5*time.Second, "with --watch, how often to look (at least 1s)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := fs.parseArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if *watch && *every < time.Second {
		return usagef("--every must be at least 1s, got %s", *every)
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	sum, err := cl.Summary(ctx)
	if err != nil {
		return err
	}
	if !*watch {
		return c.print(sum, *asJSON)
	}
	return c.follow(ctx, cl, sum, *every, *asJSON)
}

// print shows one look at the market.
func (c *statusCommand) print(sum *idlegrid.Summary, asJSON bool) error {
	if asJSON {
		return printJSON(c.env.Out, sum)
	}
	for _, l := range summaryLines(sum) {
		fmt.Fprintln(c.env.Out, l)
	}
	return nil
}

// follow shows the market every period until ctx is done: redrawn in
// place on a terminal, otherwise a timestamped line (or JSON object) a
// look. A look that fails is said and the next one tried.
func (c *statusCommand) follow(ctx context.Context, cl *client.Client, sum *idlegrid.Summary, every time.Duration, asJSON bool) error {
	tty, drawn := isTerminal(c.env.Out) && !asJSON, 0
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		if sum != nil {
			lines, err := statusFrame(sum, tty, asJSON)
			if err != nil {
				return err
			}
			drawn = c.draw(lines, tty, drawn)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		var err error
		if sum, err = cl.Summary(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(c.env.Out, "%s  status unavailable: %s; trying again in %s\n", time.Now().Format("15:04:05"), errorText(err), every)
			drawn = 0
		}
	}
}

// statusFrame is what one look of --watch shows: on a terminal the
// summary's lines under a heading, elsewhere a timestamped line, or with
// asJSON the summary as one line of JSON.
func statusFrame(sum *idlegrid.Summary, tty, asJSON bool) ([]string, error) {
	now := time.Now().Format("15:04:05")
	switch {
	case asJSON:
		b, err := json.Marshal(sum)
		return []string{string(b)}, err
	case tty:
		return append([]string{"idlegrid status at " + now + " (Ctrl-C to stop)"}, summaryLines(sum)...), nil
	}
	return []string{now + "  " + oneLine(sum) + " | nodes " + nodeStates(sum.NodesByState)}, nil
}

// draw writes lines: over the last frame's drawn lines on a terminal, or
// after them elsewhere. It returns the lines drawn.
func (c *statusCommand) draw(lines []string, tty bool, drawn int) int {
	if tty {
		return redraw(c.env.Out, lines, drawn)
	}
	for _, l := range lines {
		fmt.Fprintln(c.env.Out, l)
	}
	return 0
}

// nodeStates lists the nodes by state, online first: "8 online, 1 lost".
func nodeStates(by map[idlegrid.NodeState]int) string {
	if len(by) == 0 {
		return "none"
	}
	states := slices.SortedFunc(maps.Keys(by), func(a, b idlegrid.NodeState) int {
		if (a == idlegrid.NodeOnline) != (b == idlegrid.NodeOnline) {
			if a == idlegrid.NodeOnline {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a), string(b))
	})
	var parts []string
	for _, s := range states {
		parts = append(parts, fmt.Sprintf("%d %s", by[s], s))
	}
	return strings.Join(parts, ", ")
}
