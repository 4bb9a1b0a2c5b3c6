package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// bondCommand is "idlegrid bond": providers stake and release bonds;
// operators record deposits.
type bondCommand struct{ env *env }

func (c *bondCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("bond", `A bond is money a provider stakes as a guarantee of good conduct. A proven
offence (a forged receipt, fake hardware, a mismatched result, a broken
notice) takes the trust policy's penalty from it, most often to the harmed
renter. See docs/trust.md. 'idlegrid account' shows your bond.`, []subcommand{
		{"post", "stake some of your payable earnings (provider), or record a deposit for a provider (admin)", func(a []string) error { return c.post(ctx, a) }},
		{"release", "give some of your bond back to your payable earnings (provider)", func(a []string) error { return c.release(ctx, a) }},
	}, args)
}

func (c *bondCommand) post(ctx context.Context, args []string) error {
	fs := c.env.flags("bond post", help{
		usage: "idlegrid bond post AMOUNT [--provider ID] [--idempotency-key K] [--json]",
		about: `Stake AMOUNT (decimal, e.g. 100 or 12.50) as a bond. A provider stakes its own
payable earnings; an admin records a deposit from outside the market for
--provider. Retrying with the same --idempotency-key never stakes twice.`,
		examples: "idlegrid bond post 100\n idlegrid bond post 500 --provider acct_abc123   # admin: a deposit",
	})
	r := c.env.remoteFlags(fs)
	provider := fs.String("provider", "", "the provider whose deposit this is (admins)")
	key := idempotencyFlag(fs, "bond")
	asJSON := fs.Bool("json", false, "print JSON")
	amount, cl, err := c.amountArgs(fs, r, args)
	if err != nil {
		return err
	}
	b, replayed, err := cl.PostBondOnce(ctx, *provider, amount, orNewKey(key, "cli-bond"))
	if err != nil {
		return withKeyHint(err, *key)
	}
	if *asJSON {
		return printJSON(c.env.Out, b)
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already staked under idempotency key %s: nothing staked again; the bond of %s is %s\n", *key, b.AccountID, b.Bond)
		return nil
	}
	fmt.Fprintf(c.env.Out, "staked %s; the bond of %s is now %s (idempotency key %s)\n", amount, b.AccountID, b.Bond, *key)
	return nil
}

func (c *bondCommand) release(ctx context.Context, args []string) error {
	fs := c.env.flags("bond release", help{
		usage: "idlegrid bond release AMOUNT [--idempotency-key K] [--json]",
		about: `Give AMOUNT of your bond back to your payable earnings (providers only). It is
refused while a dispute against you is open.`,
		examples: "idlegrid bond release 50",
	})
	r := c.env.remoteFlags(fs)
	key := idempotencyFlag(fs, "release")
	asJSON := fs.Bool("json", false, "print JSON")
	amount, cl, err := c.amountArgs(fs, r, args)
	if err != nil {
		return err
	}
	b, replayed, err := cl.ReleaseBondOnce(ctx, amount, orNewKey(key, "cli-release"))
	if idlegrid.ErrorCode(err) == idlegrid.EPAYMENT {
		return bondTooSmall(ctx, cl, amount, err)
	} else if err != nil {
		return withKeyHint(err, *key)
	}
	if *asJSON {
		return printJSON(c.env.Out, b)
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already released under idempotency key %s: nothing released again; your bond is %s and %s is payable\n", *key, b.Bond, b.Payable)
		return nil
	}
	fmt.Fprintf(c.env.Out, "released %s; your bond is now %s and %s is payable (idempotency key %s)\n", amount, b.Bond, b.Payable, *key)
	return nil
}

// bondTooSmall says, in the provider's terms, that a release of amount
// was refused for want of bond, with the bond it has.
func bondTooSmall(ctx context.Context, cl *client.Client, amount idlegrid.Micros, refused error) error {
	b, err := cl.Balance(ctx, "")
	if err != nil {
		return refused
	}
	short := idlegrid.Errorf(idlegrid.EPAYMENT, "your bond is %s, less than the %s to release", b.Bond, amount)
	if b.Bond <= 0 {
		return withHint(short, "you have no bond to release; 'idlegrid bond post AMOUNT' stakes one")
	}
	return withHint(short, "release at most your bond: idlegrid bond release "+units(b.Bond))
}

func (c *bondCommand) amountArgs(fs *flagSet, r *remote, args []string) (idlegrid.Micros, *client.Client, error) {
	args, err := fs.parse(args)
	if err != nil {
		return 0, nil, err
	} else if err := fs.wantArgs(args, 1, 1, "an amount"); err != nil {
		return 0, nil, err
	}
	amount, err := idlegrid.ParseMicros(args[0])
	if err != nil || amount <= 0 {
		return 0, nil, usagef("AMOUNT: must be a positive decimal amount such as 100 or 12.50, got %q", args[0])
	}
	cl, err := r.client()
	return amount, cl, err
}

// disputeCommand is "idlegrid dispute".
type disputeCommand struct{ env *env }

func (c *disputeCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("dispute", `A dispute charges a provider with an offence. Those the market proves by
itself (a forged receipt, a broken notice, fake hardware, a mismatched
re-run) are upheld at once, with the penalty taken from the bond. An
operator may open others and uphold or dismiss them.`, []subcommand{
		{"ls", "list disputes: against you (provider), for you (renter), or all (admin)", func(a []string) error { return c.list(ctx, a) }},
		{"show", "show one dispute with its evidence", func(a []string) error { return c.show(ctx, a) }},
		{"open", "charge a provider with an offence the market cannot prove by itself (admin), or complain about a lease of yours (renter)", func(a []string) error { return c.open(ctx, a) }},
		{"uphold", "uphold an open dispute, taking the penalty from the bond (admin)", func(a []string) error { return c.resolve(ctx, a, "uphold") }},
		{"dismiss", "dismiss an open dispute (admin)", func(a []string) error { return c.resolve(ctx, a, "dismiss") }},
		{"verifications", "list re-runs of verifiable work and what they found", func(a []string) error { return c.verifications(ctx, a) }},
	}, args)
}

func (c *disputeCommand) verifications(ctx context.Context, args []string) error {
	fs := c.env.flags("dispute verifications", help{
		usage: "idlegrid dispute verifications [--provider ID] [--limit N] [--before VERIFICATION_ID] [--json]",
		about: `List verifications of work, newest first: a sampled lease of a verifiable job
re-run on another provider's node, and a tie-break on a third when the
output digests differ. A renter sees its own; a provider those touching
its runs; admins all. A full page ends with the command for the next one
(--before the page's last verification).`,
		examples: "idlegrid dispute verifications\n idlegrid dispute verifications --json\n idlegrid dispute verifications --limit 20 --before verif_abc123",
	})
	r := c.env.remoteFlags(fs)
	provider := fs.String("provider", "", "only verifications touching this provider's runs (admins)")
	limit := fs.Int("limit", 100, "at most this many")
	before := fs.String("before", "", "the verifications listed after this one: the last of the page before")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	} else if err := checkLimit(*limit, "verifications", 100); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	f := idlegrid.VerificationFilter{ProviderID: *provider, Limit: *limit, Before: *before}
	vs, err := cl.ListVerifications(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(vs))
	}
	if len(vs) == 0 {
		return c.env.noneListed("verification", "verifications", "")
	}
	t := newTable(c.env.Out, "ID", "STATE", "LEASE", "PROVIDER", "RE-RUN", "CONVICTED", "OUTCOME")
	for _, v := range vs {
		t.row(v.ID, v.State, v.Original.LeaseID, v.Original.ProviderID, orDash(v.Rerun.LeaseID), orDash(convicted(v)), orDash(clip(v.Outcome, 60)))
	}
	if err := t.flush(); err != nil || len(vs) == 0 {
		return err
	}
	return nextPage(c.env.Out, "idlegrid dispute verifications"+listFlags("", *provider), len(vs), f.Limit, vs[len(vs)-1].ID)
}

func (c *disputeCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("dispute ls", help{
		usage: "idlegrid dispute ls [--state open,upheld,dismissed] [--provider ID] [--limit N] [--before DISPUTE_ID] [--json]",
		about: `List disputes, newest first: those against you, those you were harmed in, or
all for admins. A full page ends with the command for the next one (--before
the page's last dispute).`,
		examples: "idlegrid dispute ls\n idlegrid dispute ls --state open\n idlegrid dispute ls --limit 20 --before dispute_abc123",
	})
	r := c.env.remoteFlags(fs)
	states := fs.String("state", "", "only disputes in these states: open, upheld or dismissed (comma-separated)")
	provider := fs.String("provider", "", "only disputes against this provider (admins)")
	limit := fs.Int("limit", 100, "at most this many disputes")
	before := fs.String("before", "", "the disputes listed after this one: the last of the page before")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	} else if err := checkLimit(*limit, "disputes", 100); err != nil {
		return err
	}
	f := idlegrid.DisputeFilter{ProviderID: *provider, Limit: *limit, Before: *before}
	if f.States, err = parseStates(*states, idlegrid.DisputeState.Valid, "dispute", "open, upheld or dismissed"); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	ds, err := cl.ListDisputes(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(ds))
	}
	if len(ds) == 0 {
		return c.env.noneListed("dispute", "disputes", "")
	}
	t := newTable(c.env.Out, "ID", "OFFENCE", "STATE", "PROVIDER", "LEASE", "PENALTY", "TO", "OPENED")
	for _, d := range ds {
		penalty, to := any(d.PenaltyMicros), orDash(d.PenaltyTo)
		if d.State == idlegrid.DisputeOpen {
			penalty, to = "when upheld", "-"
		}
		t.row(d.ID, d.Offence, d.State, d.ProviderID, orDash(d.LeaseID), penalty, to, d.CreatedAt.UTC().Format(time.RFC3339))
	}
	if err := t.flush(); err != nil || len(ds) == 0 {
		return err
	}
	return nextPage(c.env.Out, "idlegrid dispute ls"+listFlags(*states, *provider), len(ds), f.Limit, ds[len(ds)-1].ID)
}

// convicted is the provider a verification convicted: the one whose run's
// output the other two contradicted; "" when it convicted nobody.
func convicted(v *idlegrid.Verification) string {
	if v.State != idlegrid.VerificationConvicted || v.Tiebreak == nil {
		return ""
	}
	if v.Tiebreak.Digest == v.Original.Digest {
		return v.Rerun.ProviderID
	}
	return v.Original.ProviderID
}

func (c *disputeCommand) show(ctx context.Context, args []string) error {
	fs := c.env.flags("dispute show", help{
		usage:    "idlegrid dispute show ID [--json]",
		about:    "Show a dispute: the offence, its evidence, and the penalty taken.",
		examples: "idlegrid dispute show dispute_abc123",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "a dispute ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	d, err := cl.FindDispute(ctx, args[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, d)
	}
	return printDispute(c.env, d)
}

func (c *disputeCommand) open(ctx context.Context, args []string) error {
	fs := c.env.flags("dispute open", help{
		usage: "idlegrid dispute open (--provider ID | --lease ID) --offence OFFENCE --evidence TEXT [--node ID] [--lease ID] [--renter ID] [--harm AMOUNT] [--idempotency-key K] [--json]",
		about: `Charge a provider with an offence the market cannot prove by itself:
forged_receipt, fake_hardware, mismatched_result or broken_notice. Admins
charge any provider; a renter complains about a lease of its own, naming
only --lease (the provider and node are the lease's, and --harm, at most
what the lease cost, defaults to that). The dispute opens, its evidence in
the audit log, and the provider cannot release its bond until an admin
upholds it ('idlegrid dispute uphold', which takes the trust policy's
penalty from the bond, and refunds the renter from the lease's pending
earnings what the bond did not pay) or dismisses it. --harm is what the
offence cost the renter, which the penalty may scale with; a --lease names
its renter, who receives the penalty when the policy says so. Run again with
the same --idempotency-key and the same flags, it opens nothing: it shows
the dispute the first run opened.`,
		examples: "idlegrid dispute open --provider acct_abc123 --lease lease_abc123 --offence broken_notice --evidence 'node rebooted mid-lease twice; see agent logs' --harm 12.50\n" +
			"idlegrid dispute open --lease lease_abc123 --offence mismatched_result --evidence 'my re-run elsewhere gives another digest'   # a renter's complaint",
	})
	r := c.env.remoteFlags(fs)
	var d idlegrid.Dispute
	fs.StringVar(&d.ProviderID, "provider", "", "the provider charged (required, but for a renter's complaint, where it is the --lease's)")
	fs.StringVar(&d.Offence, "offence", "", "forged_receipt, fake_hardware, mismatched_result or broken_notice (required)")
	fs.StringVar(&d.Evidence, "evidence", "", "what was found, in words the provider can check (required; at most 8 KiB)")
	fs.StringVar(&d.NodeID, "node", "", "the provider's node at fault")
	fs.StringVar(&d.LeaseID, "lease", "", "the lease at fault, on the provider's node")
	fs.StringVar(&d.RenterID, "renter", "", "the harmed renter (default: the --lease's)")
	harm := fs.String("harm", "0", "what the offence cost the renter, decimal")
	key := fs.String("idempotency-key", "", "open at most once under this key: run again with it and the same flags, the command shows the dispute the first run opened instead of opening another (default: a new key each time)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := fs.parseArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if d.ProviderID == "" && d.LeaseID == "" {
		return usagef("--provider is required: the provider charged, e.g. --provider acct_abc123 ('idlegrid account ls --role provider' lists them); a renter names the --lease it complains about")
	} else if d.Offence == "" {
		return usagef("--offence is required: forged_receipt, fake_hardware, mismatched_result or broken_notice")
	} else if d.Evidence == "" {
		return usagef("--evidence is required: say what was found, for the provider to read")
	}
	var err error
	if d.HarmMicros, err = idlegrid.ParseMicros(*harm); err != nil || d.HarmMicros < 0 {
		return usagef("--harm: must be a decimal amount such as 0 or 12.50, got %q", *harm)
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	out, replayed, err := cl.OpenDisputeOnce(ctx, d, orNewKey(key, "cli-dispute"))
	if err != nil {
		return openFailed(ctx, err, *key)
	}
	if *asJSON {
		return printJSON(c.env.Out, out)
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already opened under idempotency key %s: %s (%s), not opened again\n", *key, out.ID, out.State)
	}
	if err := printDispute(c.env, out); err != nil {
		return err
	}
	if out.State == idlegrid.DisputeOpen && d.ProviderID == "" { // a renter's complaint, named by its lease
		fmt.Fprintf(c.env.Out, "an admin decides it; follow it with: idlegrid dispute show %s\n", out.ID)
	} else if out.State == idlegrid.DisputeOpen {
		fmt.Fprintf(c.env.Out, "resolve it with: idlegrid dispute uphold %s --reason WHY (or dismiss)\n", out.ID)
	}
	return nil
}

// openFailed explains a dispute's opening that failed (see answerLost).
func openFailed(ctx context.Context, err error, key string) error {
	if !answerLost(ctx, err) {
		return err
	}
	return withHint(err, "it may have been opened before the answer was lost: run the same command with --idempotency-key "+key+
		" to open it at most once (it shows the dispute if there is one), or look with 'idlegrid dispute ls --state open'")
}

func printDispute(e *env, d *idlegrid.Dispute) error {
	w := e.Out
	fmt.Fprintf(w, "dispute   %s (%s)\noffence   %s\nprovider  %s", d.ID, d.State, d.Offence, d.ProviderID)
	if d.NodeID != "" {
		fmt.Fprintf(w, " (node %s)", d.NodeID)
	}
	fmt.Fprintf(w, "\nlease     %s\nrenter    %s\nevidence  %s\n", orDash(d.LeaseID), orDash(d.RenterID), d.Evidence)
	if d.State == idlegrid.DisputeOpen {
		fmt.Fprintf(w, "harm      %s\npenalty   set when it is upheld, from the bond as it is then", d.HarmMicros)
	} else {
		fmt.Fprintf(w, "harm      %s\npenalty   %s to %s", d.HarmMicros, d.PenaltyMicros, orDash(d.PenaltyTo))
		if d.RefundMicros > 0 {
			fmt.Fprintf(w, "; %s of the lease's pending earnings refunded to the renter", d.RefundMicros)
		}
		if d.FeeRefundMicros > 0 {
			fmt.Fprintf(w, "; %s of the market's fee on the lease refunded to the renter", d.FeeRefundMicros)
		}
	}
	if d.TransferID != "" {
		fmt.Fprintf(w, " (transfer %s)", d.TransferID)
	}
	fmt.Fprintf(w, "\nopened    %s\n", d.CreatedAt.UTC().Format(time.RFC3339))
	if d.ResolvedAt != nil {
		fmt.Fprintf(w, "resolved  %s by %s: %s\n", stamp(d.ResolvedAt), d.ResolvedBy, d.Resolution)
	}
	if len(d.Detail) > 0 {
		fmt.Fprintf(w, "detail    %s\n", d.Detail)
	}
	return nil
}

// resolveExample is a reason an admin might give for each resolution.
var resolveExample = map[string]string{
	"uphold":  "'logs show the node killed the job'",
	"dismiss": "'the job ran out of memory on its own; the node is not at fault'",
}

func (c *disputeCommand) resolve(ctx context.Context, args []string, verb string) error {
	fs := c.env.flags("dispute "+verb, help{
		usage:    "idlegrid dispute " + verb + " ID --reason WHY [--json]",
		about:    "Resolve an open dispute (admins only); --reason is shown to both sides.",
		examples: "idlegrid dispute " + verb + " dispute_abc123 --reason " + resolveExample[verb],
	})
	r := c.env.remoteFlags(fs)
	reason := fs.String("reason", "", "why (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 1, 1, "a dispute ID"); err != nil {
		return err
	} else if *reason == "" {
		return usagef("--reason is required: say why you %s the dispute", verb)
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	var d *idlegrid.Dispute
	if verb == "uphold" {
		d, err = cl.UpholdDispute(ctx, args[0], *reason)
	} else {
		d, err = cl.DismissDispute(ctx, args[0], *reason)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, d)
	}
	return printDispute(c.env, d)
}
