package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// reputation is "idlegrid node reputation".
func (c *nodeCommand) reputation(ctx context.Context, args []string) error {
	fs := c.env.flags("node reputation", help{
		usage: "idlegrid node reputation ID|NAME [--json]",
		about: `Show a node's reputation: its score, the level it holds and its badges.
Its provider and admins also see the evidence: the formula with the node's
counts, the level's reasons, the latest facts, every promotion and
demotion, and advice on what would raise the score. docs/trust.md explains
the formula; 'idlegrid node ls' lists node IDs.`,
		examples: "idlegrid node reputation node_abc123\n\t\tidlegrid node reputation node_abc123 --json",
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
	v, err := cl.NodeReputation(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, v)
	}
	return printReputation(c.env.Out, v)
}

// printReputation writes a reputation view for people.
func printReputation(w io.Writer, v *idlegrid.ReputationView) error {
	t := newTable(w, strings.ToUpper(string(v.Subject[:1]))+string(v.Subject[1:]), v.SubjectID)
	t.row("Provider", v.ProviderID)
	t.row("Score", fmt.Sprintf("%.3f (as of %s)", v.Score, v.AsOf.UTC().Format(time.RFC3339)))
	t.row("Level", fmt.Sprintf("%d (%s)", v.Level, v.LevelName))
	t.row("Badges", strings.Join(v.Badges, ", "))
	t.row("Trust policy", fmt.Sprintf("version %d, sha256 %s", v.PolicyVersion, clip(v.PolicySHA256, 12)))
	d := v.Detail
	if d == nil {
		return t.flush()
	}
	t.row("Formula", d.Formula)
	t.row("Served", fmt.Sprintf("%.1f GPU-hours", d.GPUHoursServed))
	t.row("Hardware", map[bool]string{true: "verified", false: "not verified"}[d.HardwareVerified])
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nEvidence (decayed to now; weights in lease-equivalents):")
	e := newTable(w, "  DIMENSION", "GOOD", "BAD", "WEIGHT GOOD", "WEIGHT BAD")
	for _, x := range d.Dimensions {
		e.row("  "+x.Dimension, fmt.Sprintf("%.2f", x.Good), fmt.Sprintf("%.2f", x.Bad), fmt.Sprintf("%g", x.WeightGood), fmt.Sprintf("%g", x.WeightBad))
	}
	if err := e.flush(); err != nil {
		return err
	}
	section(w, "Level", d.LevelReasons)
	advice := make([]string, len(d.Advice))
	for i, a := range d.Advice {
		advice[i] = a.Text
	}
	section(w, "What would raise the score", advice)
	changes := make([]string, len(d.LevelChanges))
	for i, c := range d.LevelChanges {
		verb := "demoted"
		if c.To > c.From {
			verb = "promoted"
		}
		changes[i] = fmt.Sprintf("%s %s from %d (%s) to %d (%s): %s", c.At.UTC().Format(time.RFC3339), verb,
			c.From, c.FromName, c.To, c.ToName, strings.Join(c.Reasons, "; "))
	}
	section(w, "Level history, newest first", changes)
	if len(d.Facts) > 0 {
		facts := make([]string, len(d.Facts))
		for i, f := range d.Facts {
			facts[i] = fmt.Sprintf("%s %s%s", f.At.UTC().Format(time.RFC3339), f.Kind, factNote(f))
		}
		section(w, "Latest facts", facts)
	}
	return nil
}

func factNote(f *idlegrid.ReputationFact) string {
	var parts []string
	if f.Count > 1 {
		parts = append(parts, fmt.Sprintf("×%d", f.Count))
	}
	if f.PromisedSeconds > 0 {
		parts = append(parts, fmt.Sprintf("online %s of %s promised", seconds(f.OnlineSeconds), seconds(f.PromisedSeconds)))
	}
	if f.Source != "" {
		parts = append(parts, f.Source)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func section(w io.Writer, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, l := range lines {
		fmt.Fprintf(w, "  - %s\n", l)
	}
}

// loadTrustPolicy reads the trust policy file at path, or returns the
// default policy when path is empty.
func loadTrustPolicy(path string) (*trustpolicy.Policy, error) {
	if path == "" {
		return trustpolicy.Default(), nil
	}
	p, err := trustpolicy.Load(path)
	if err != nil {
		return nil, withHint(err, "fix the file, or leave out --trust-policy for the default policy (docs/trust.md lists every key)")
	}
	return p, nil
}

// devTrustPolicy is the demo market's policy: the default, except that
// newcomers may run gold jobs, since the demo's nodes are all new and gold
// would otherwise wait until they had served 200 GPU-hours, and that the
// demo's simulated GPUs, whose challenges are computed on the CPU, count
// as verified hardware when they pass.
func devTrustPolicy() *trustpolicy.Policy {
	p, err := trustpolicy.Parse([]byte("version: 2\ngold: {min_level: 0}\nchallenges: {allow_simulated_runners: true}\n"))
	if err != nil {
		panic("cli: the demo trust policy is invalid: " + err.Error())
	}
	return p
}
