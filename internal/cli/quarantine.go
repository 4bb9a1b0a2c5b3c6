package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// quarantine is "idlegrid node quarantine": list, add and lift
// quarantines (docs/trust.md).
func (c *nodeCommand) quarantine(ctx context.Context, args []string) error {
	return c.env.runGroup("node quarantine", `A quarantined node takes no new leases: a failed hardware challenge puts it
there with the evidence, or an admin does. Only an admin can lift it.`, []subcommand{
		{"ls", "list quarantines (in force, or --all)", func(a []string) error { return c.quarantineList(ctx, a) }},
		{"add", "quarantine a node, with a reason (admins)", func(a []string) error { return c.quarantineAdd(ctx, a) }},
		{"lift", "lift a node's quarantine, with a note (admins)", func(a []string) error { return c.quarantineLift(ctx, a) }},
	}, args)
}

func (c *nodeCommand) quarantineList(ctx context.Context, args []string) error {
	fs := c.env.flags("node quarantine ls", help{
		usage: "idlegrid node quarantine ls [--all] [--limit N] [--before QUARANTINE_ID] [--json]",
		about: `List quarantines, newest first: those in force, or with --all the lifted
ones too. Admins see every node's, providers their own nodes'. Show one
node's evidence with 'idlegrid node hardware ID'. A full page ends with the
command for the next one (--before the page's last quarantine).`,
		examples: "idlegrid node quarantine ls\n\t\tidlegrid node quarantine ls --all --json\n\t\tidlegrid node quarantine ls --all --limit 20 --before qua_abc123",
	})
	r := c.env.remoteFlags(fs)
	all := fs.Bool("all", false, "include lifted quarantines")
	limit := fs.Int("limit", 100, "at most this many quarantines")
	before := fs.String("before", "", "the quarantines listed after this one: the last of the page before")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	} else if err := checkLimit(*limit, "quarantines", 100); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	qs, err := cl.ListQuarantinesPage(ctx, idlegrid.QuarantineFilter{ActiveOnly: !*all, Limit: *limit, Before: *before})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(qs))
	}
	if len(qs) == 0 && *before == "" && !*all {
		_, err := fmt.Fprintln(c.env.Out, "no quarantine in force ('idlegrid node quarantine ls --all' lists the lifted ones too)")
		return err
	} else if len(qs) == 0 {
		return c.env.noneListed("quarantine", "quarantines", "")
	}
	t := newTable(c.env.Out, "ID", "NODE", "PROVIDER", "SINCE", "LIFTED", "REASON")
	for _, q := range qs {
		t.row(q.ID, q.NodeID, q.ProviderID, stamp(&q.Since), stamp(q.LiftedAt), clip(q.Reason, 120))
	}
	if err := t.flush(); err != nil || len(qs) == 0 {
		return err
	}
	cmd := "idlegrid node quarantine ls"
	if *all {
		cmd += " --all"
	}
	return nextPage(c.env.Out, cmd, len(qs), *limit, qs[len(qs)-1].ID)
}

func (c *nodeCommand) quarantineAdd(ctx context.Context, args []string) error {
	fs := c.env.flags("node quarantine add", help{
		usage:    "idlegrid node quarantine add ID|NAME --reason TEXT [--json]",
		about:    "Quarantine a node: it takes no new leases until an admin lifts it. Admins only.",
		examples: `idlegrid node quarantine add node_abc123 --reason "receipts disagree with telemetry; investigating"`,
	})
	r := c.env.remoteFlags(fs)
	reason := fs.String("reason", "", "why, for the provider to read (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one node: its ID or its name")
	if err != nil {
		return err
	} else if strings.TrimSpace(*reason) == "" {
		return usagef("--reason is required: say why, for the provider to read, e.g. idlegrid node quarantine add %s --reason \"receipts disagree with telemetry\"", args[0])
	}
	cl, id, err := r.nodeClient(ctx, args[0])
	if err != nil {
		return err
	}
	q, err := cl.QuarantineNode(ctx, id, *reason)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, q)
	}
	_, err = fmt.Fprintf(c.env.Out, "node %s quarantined: %s\nlift it with: idlegrid node quarantine lift %s --note TEXT\n", q.NodeID, q.Reason, q.NodeID)
	return err
}

func (c *nodeCommand) quarantineLift(ctx context.Context, args []string) error {
	fs := c.env.flags("node quarantine lift", help{
		usage:    "idlegrid node quarantine lift ID|NAME [--note TEXT] [--json]",
		about:    "Lift a node's quarantine, so that it takes leases again. Admins only; the note is kept with the record.",
		examples: `idlegrid node quarantine lift node_abc123 --note "vendor replaced the card; challenge passed"`,
	})
	r := c.env.remoteFlags(fs)
	note := fs.String("note", "", "why it is lifted, for the record")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one node: its ID or its name")
	if err != nil {
		return err
	}
	cl, id, err := r.nodeClient(ctx, args[0])
	if err != nil {
		return err
	}
	q, err := cl.LiftQuarantine(ctx, id, *note)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, q)
	}
	_, err = fmt.Fprintf(c.env.Out, "node %s: quarantine lifted (it was: %s)\n", q.NodeID, q.Reason)
	return err
}

// challenges is "idlegrid node challenges": a node's challenge history,
// where 'node hardware' shows the newest.
func (c *nodeCommand) challenges(ctx context.Context, args []string) error {
	fs := c.env.flags("node challenges", help{
		usage: "idlegrid node challenges ID|NAME [--state issued,passed,failed,expired,unsupported] [--limit N] [--before CHALLENGE_ID] [--json]",
		about: `List a node's hardware challenges, newest first, with their findings. Owners
and admins. A full page ends with the command for the next one (--before
the page's last challenge).`,
		examples: "idlegrid node challenges node_abc123\n\t\tidlegrid node challenges node_abc123 --state failed\n\t\tidlegrid node challenges node_abc123 --limit 20 --before chl_abc123",
	})
	r := c.env.remoteFlags(fs)
	states := fs.String("state", "", "only challenges in these states, comma-separated")
	limit := fs.Int("limit", 100, "at most this many challenges")
	before := fs.String("before", "", "the challenges listed after this one: the last of the page before")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one node: its ID or its name")
	if err != nil {
		return err
	} else if err := checkLimit(*limit, "challenges", 100); err != nil {
		return err
	}
	f := idlegrid.ChallengeFilter{Limit: *limit, Before: *before}
	if f.States, err = parseStates(*states, idlegrid.ChallengeState.Valid, "challenge", "issued, passed, failed, expired or unsupported"); err != nil {
		return err
	}
	cl, id, err := r.nodeClient(ctx, args[0])
	if err != nil {
		return err
	}
	cs, err := cl.ListChallenges(ctx, id, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(cs))
	}
	if len(cs) == 0 {
		return c.env.noneListed("challenge", "challenges", "")
	}
	t := newTable(c.env.Out, "ID", "GPU", "MODEL", "REASON", "STATE", "ISSUED", "FINDINGS")
	for _, x := range cs {
		t.row(x.ID, x.GPUUUID, x.Model, x.Reason, x.State, stamp(&x.IssuedAt), orDash(clip(strings.Join(x.Findings, "; "), 120)))
	}
	if err := t.flush(); err != nil || len(cs) == 0 {
		return err
	}
	return nextPage(c.env.Out, "idlegrid node challenges "+id+listFlags(*states, ""), len(cs), *limit, cs[len(cs)-1].ID)
}

// hardware is "idlegrid node hardware": a node's attested hardware.
func (c *nodeCommand) hardware(ctx context.Context, args []string) error {
	fs := c.env.flags("node hardware", help{
		usage: "idlegrid node hardware ID|NAME [--challenge] [--json]",
		about: `Show a node's hardware record: the fingerprint its key signed (GPUs, PCI
IDs, driver, VBIOS), every change flagged since, its hardware challenges
with their findings, and its quarantines with the evidence. Owners and
admins. --challenge (admins) first issues a challenge to each of its GPUs.`,
		examples: "idlegrid node hardware node_abc123\n\t\tidlegrid node hardware node_abc123 --challenge",
	})
	r := c.env.remoteFlags(fs)
	issue := fs.Bool("challenge", false, "issue a challenge to each GPU first (admins)")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one node: its ID or its name")
	if err != nil {
		return err
	}
	cl, id, err := r.nodeClient(ctx, args[0])
	if err != nil {
		return err
	}
	if *issue {
		if _, err := cl.ChallengeNode(ctx, id); err != nil {
			return err
		}
	}
	v, err := cl.NodeAttestation(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, v)
	}
	return printHardware(c.env.Out, v)
}

// owedNote says, for people, what a node's owed challenge means for it.
func owedNote(o *idlegrid.OwedChallenge) string {
	if o.ChallengeID != "" {
		return "since " + stamp(&o.Since) + "; issued as " + o.ChallengeID + ": the node takes no new leases until it is answered or expires"
	}
	note := "since " + stamp(&o.Since) + ", while every GPU runs a lease; issued when one is idle"
	if o.NoNewLeases {
		note += "; owed too long (trust policy challenges.max_owed): it takes no new leases until then, and until it is answered"
	}
	return note
}

// printHardware writes a node's hardware record for people.
func printHardware(w io.Writer, v *idlegrid.NodeAttestationView) error {
	t := newTable(w, "Node", v.NodeID)
	t.row("Status", v.VerifiedNote)
	if o := v.ChallengeOwed; o != nil {
		t.row("Challenge owed", owedNote(o))
	}
	if v.Current != nil {
		t.row("Fingerprint", fmt.Sprintf("%s (signed %s)", clip(v.Current.Hash, 16), v.Current.SignedAt.UTC().Format(time.RFC3339)))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if v.Current != nil {
		fmt.Fprintln(w, "\nGPUs:")
		g := newTable(w, "  UUID", "MODEL", "VRAM MB", "PCI BUS", "DEVICE", "SUBSYSTEM", "DRIVER", "VBIOS")
		for _, x := range v.Current.Fingerprint.GPUs {
			g.row("  "+x.UUID, x.Model, x.VRAMMB, orDash(x.PCIBusID), orDash(x.PCIDeviceID), orDash(x.PCISubsystemID), orDash(x.DriverVersion), orDash(x.VBIOSVersion))
		}
		if err := g.flush(); err != nil {
			return err
		}
	}
	if len(v.Changes) > 0 {
		fmt.Fprintln(w, "\nChanges flagged:")
		ch := newTable(w, "  AT", "GPU", "KIND", "BEFORE", "AFTER")
		for _, x := range v.Changes {
			ch.row("  "+stamp(&x.At), x.GPUUUID, x.Kind, orDash(x.Before), orDash(x.After))
		}
		if err := ch.flush(); err != nil {
			return err
		}
	}
	if len(v.Challenges) > 0 {
		fmt.Fprintln(w, "\nChallenges:")
		cs := newTable(w, "  ID", "GPU", "MODEL", "REASON", "STATE", "ISSUED", "FINDINGS")
		for _, x := range v.Challenges {
			cs.row("  "+x.ID, x.GPUUUID, x.Model, x.Reason, x.State, stamp(&x.IssuedAt), orDash(strings.Join(x.Findings, "; ")))
		}
		if err := cs.flush(); err != nil {
			return err
		}
	}
	if len(v.Quarantines) > 0 {
		fmt.Fprintln(w, "\nQuarantines:")
		qs := newTable(w, "  SINCE", "LIFTED", "REASON", "EVIDENCE")
		for _, q := range v.Quarantines {
			qs.row("  "+stamp(&q.Since), stamp(q.LiftedAt), q.Reason, clip(string(q.Evidence), 200))
		}
		return qs.flush()
	}
	return nil
}
