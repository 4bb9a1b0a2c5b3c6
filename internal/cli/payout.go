package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// payoutCommand is "idlegrid payout": providers ask to be paid; operators
// settle or reject.
type payoutCommand struct{ env *env }

func (c *payoutCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("payout", `A provider's earnings are pending for the payout hold after each settlement,
then payable. A payout request moves payable money in flight; an operator
settles it once the money is sent, or rejects it, which makes it payable again.`, []subcommand{
		{"request", "ask for some of your payable earnings to be paid out (provider)", func(a []string) error { return c.request(ctx, a) }},
		{"ls", "list payouts: your own, or everyone's for admins", func(a []string) error { return c.list(ctx, a) }},
		{"settle", "record that a payout's money was sent (admin)", func(a []string) error { return c.settle(ctx, a) }},
		{"reject", "refuse a payout; its money becomes payable again (admin)", func(a []string) error { return c.reject(ctx, a) }},
	}, args)
}

// idempotencyFlag adds --idempotency-key; the CLI makes a fresh key when it
// is not given, and prints it, so that a retry can reuse it.
func idempotencyFlag(fs *flagSet, what string) *string {
	return fs.String("idempotency-key", "", "makes a retried "+what+" a no-op (default: a fresh key, printed)")
}

func orNewKey(key *string, prefix string) string {
	if *key == "" {
		*key = idlegrid.NewID(prefix)
	}
	return *key
}

func (c *payoutCommand) request(ctx context.Context, args []string) error {
	fs := c.env.flags("payout request", help{
		usage: "idlegrid payout request AMOUNT [--idempotency-key K] [--json]",
		about: `Ask for AMOUNT (decimal, e.g. 250 or 12.50) of your payable earnings to be
paid out (providers only). It must not be more than is payable: see
'idlegrid account'. Retrying with the same --idempotency-key never asks twice.`,
		examples: "idlegrid payout request 250\n idlegrid payout request 250 --idempotency-key payout-2026-11",
	})
	r := c.env.remoteFlags(fs)
	key := idempotencyFlag(fs, "request")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "an amount")
	if err != nil {
		return err
	}
	amount, err := idlegrid.ParseMicros(args[0])
	if err != nil || amount <= 0 {
		return usagef("AMOUNT: must be a positive decimal amount such as 250 or 12.50, got %q", args[0])
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	p, replayed, err := cl.RequestPayoutOnce(ctx, amount, orNewKey(key, "cli-payout"))
	if err != nil {
		return withKeyHint(err, *key)
	}
	if *asJSON {
		return printJSON(c.env.Out, p)
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already requested under idempotency key %s: payout %s of %s, not requested again; it is %s\n", *key, p.ID, p.AmountMicros, p.State)
	} else {
		fmt.Fprintf(c.env.Out, "requested payout %s of %s (idempotency key %s); it is %s\n", p.ID, p.AmountMicros, *key, p.State)
	}
	return nil
}

// withKeyHint tells how to retry a money call that failed on the way.
func withKeyHint(err error, key string) error {
	if idlegrid.ErrorCode(err) == idlegrid.EINTERNAL || idlegrid.ErrorCode(err) == idlegrid.EUNAVAILABLE {
		return withHint(err, "retry with --idempotency-key "+key+": if the first try went through, it is not applied twice")
	}
	return err
}

func (c *payoutCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("payout ls", help{
		usage: "idlegrid payout ls [--state requested,settled,rejected] [--provider ID] [--oldest] [--limit N] [--before PAYOUT_ID | --after PAYOUT_ID] [--json]",
		about: `List payouts, newest first, or with --oldest the longest waiting first: a
provider's own, or everyone's for admins. A full page ends with the command
for the next one (--before the page's last payout; with --oldest, --after
it).`,
		examples: "idlegrid payout ls\n idlegrid payout ls --state requested --oldest\n idlegrid payout ls --limit 20 --before payout_abc123",
	})
	r := c.env.remoteFlags(fs)
	states := fs.String("state", "", "only payouts in these states: requested, settled or rejected (comma-separated)")
	provider := fs.String("provider", "", "only this provider's payouts (admins)")
	limit := fs.Int("limit", 100, "at most this many payouts")
	oldest := fs.Bool("oldest", false, "the oldest first, as they are settled")
	before := fs.String("before", "", "the payouts listed after this one: the last of the page before")
	after := fs.String("after", "", "with --oldest, the payouts listed after this one: the last of the page before")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	} else if err := checkLimit(*limit, "payouts", 100); err != nil {
		return err
	}
	f := idlegrid.PayoutFilter{ProviderID: *provider, Limit: *limit, OldestFirst: *oldest, Before: *before, After: *after}
	if err := payoutCursor(f); err != nil {
		return err
	}
	if f.States, err = parseStates(*states, idlegrid.PayoutState.Valid, "payout", "requested, settled or rejected"); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	ps, err := cl.ListPayouts(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(ps))
	}
	if len(ps) == 0 {
		return c.env.noneListed("payout", "payouts", "")
	}
	if err := printPayouts(c.env, ps); err != nil || len(ps) == 0 {
		return err
	}
	if f.OldestFirst {
		return nextPageAfter(c.env.Out, "idlegrid payout ls --oldest"+listFlags(*states, *provider), len(ps), f.Limit, ps[len(ps)-1].ID)
	}
	return nextPage(c.env.Out, "idlegrid payout ls"+listFlags(*states, *provider), len(ps), f.Limit, ps[len(ps)-1].ID)
}

// payoutCursor refuses a page's cursor that does not go with the order
// asked for, before asking the server.
func payoutCursor(f idlegrid.PayoutFilter) error {
	switch {
	case f.Before != "" && f.OldestFirst:
		return usagef("--before pages newest first; with --oldest, go on with --after the last payout of the page before")
	case f.After != "" && !f.OldestFirst:
		return usagef("--after pages oldest first; add --oldest, or page newest first with --before")
	}
	return nil
}

// listFlags are the --state and --provider flags of a payout or dispute
// list, for the command of its next page.
func listFlags(states, provider string) string {
	s := ""
	if states != "" {
		s += " --state " + states
	}
	if provider != "" {
		s += " --provider " + provider
	}
	return s
}

func printPayouts(e *env, ps []*idlegrid.Payout) error {
	t := newTable(e.Out, "ID", "PROVIDER", "AMOUNT", "STATE", "REQUESTED", "RESOLVED", "NOTE")
	for _, p := range ps {
		t.row(p.ID, p.ProviderID, p.AmountMicros, p.State, p.CreatedAt.UTC().Format(time.RFC3339), stamp(p.ResolvedAt), orDash(clip(p.Reason, 40)))
	}
	return t.flush()
}

func (c *payoutCommand) settle(ctx context.Context, args []string) error {
	fs := c.env.flags("payout settle", help{
		usage: "idlegrid payout settle ID [--reference REF] [--idempotency-key K] [--json]",
		about: `Record that a requested payout's money was sent (admins only): it leaves the
market. --reference is the payment's reference, shown to the provider.`,
		examples: "idlegrid payout settle payout_abc123 --reference 'wire 2026-11-30 #4471'",
	})
	r := c.env.remoteFlags(fs)
	ref := fs.String("reference", "", "the payment's reference, e.g. a bank transfer ID")
	key := idempotencyFlag(fs, "settle")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "a payout ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	p, replayed, err := cl.SettlePayoutOnce(ctx, args[0], *ref, orNewKey(key, "cli-settle"))
	if err != nil {
		return withKeyHint(err, *key)
	}
	if *asJSON {
		return printJSON(c.env.Out, p)
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already settled under idempotency key %s: payout %s of %s to %s, nothing sent again\n", *key, p.ID, p.AmountMicros, p.ProviderID)
		return nil
	}
	fmt.Fprintf(c.env.Out, "settled payout %s: %s to %s (idempotency key %s)\n", p.ID, p.AmountMicros, p.ProviderID, *key)
	return nil
}

func (c *payoutCommand) reject(ctx context.Context, args []string) error {
	fs := c.env.flags("payout reject", help{
		usage:    "idlegrid payout reject ID --reason WHY [--idempotency-key K] [--json]",
		about:    "Refuse a requested payout (admins only); its money becomes payable again.",
		examples: "idlegrid payout reject payout_abc123 --reason 'bank details missing'",
	})
	r := c.env.remoteFlags(fs)
	reason := fs.String("reason", "", "why, for the provider (required)")
	key := idempotencyFlag(fs, "reject")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 1, 1, "a payout ID"); err != nil {
		return err
	} else if *reason == "" {
		return usagef("--reason is required, e.g. --reason 'bank details missing'")
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	p, replayed, err := cl.RejectPayoutOnce(ctx, args[0], *reason, orNewKey(key, "cli-reject"))
	if err != nil {
		return withKeyHint(err, *key)
	}
	if *asJSON {
		return printJSON(c.env.Out, p)
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already rejected under idempotency key %s: payout %s of %s, nothing moved again\n", *key, p.ID, p.AmountMicros)
		return nil
	}
	fmt.Fprintf(c.env.Out, "rejected payout %s: %s is payable to %s again (idempotency key %s)\n", p.ID, p.AmountMicros, p.ProviderID, *key)
	return nil
}
