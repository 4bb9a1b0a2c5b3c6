package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// accountCommand is "idlegrid account".
type accountCommand struct{ env *env }

func (c *accountCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "--") && args[0] != "--help" {
		return c.show(ctx, args) // "idlegrid account" shows your own
	}
	return c.env.runGroup("account", "Accounts are renters, providers and admins; each has a balance in the escrow ledger.", []subcommand{
		{"show", "your money at a glance: balance, holds and spend, or earnings and payouts (the default)", func(a []string) error { return c.show(ctx, a) }},
		{"create", "create an account and its first API key (admin)", func(a []string) error { return c.create(ctx, a) }},
		{"ls", "list accounts (admin)", func(a []string) error { return c.list(ctx, a) }},
		{"balance", "show a balance: available, held in escrow, spent; pending, payable, paid out", func(a []string) error { return c.balance(ctx, a) }},
		{"topup", "add funds to a renter's account (admin)", func(a []string) error { return c.topup(ctx, a) }},
		{"transfers", "list the ledger transfers of an account", func(a []string) error { return c.transfers(ctx, a) }},
		{"statement", "a month's statement as a table, CSV or JSON", func(a []string) error { return c.statement(ctx, a) }},
		{"limit", "set or lift an account's monthly spend limit (admin)", func(a []string) error { return c.limit(ctx, a) }},
		{"notices", "what the market told you, such as leases stopped before your money ran out", func(a []string) error { return c.notices(ctx, a) }},
	}, args)
}

// createdAccount is the --json form of "account create".
type createdAccount struct {
	Account *idlegrid.Account `json:"account"`
	Key     *idlegrid.APIKey  `json:"key"`
	Secret  string            `json:"secret"`
	// Replayed is true when the account was made before under the
	// idempotency key: Key is a new key for it.
	Replayed bool `json:"replayed,omitempty"`
}

func (c *accountCommand) create(ctx context.Context, args []string) error {
	fs := c.env.flags("account create", help{
		usage: "idlegrid account create --name N --role renter|provider|admin [--idempotency-key K] [--json]",
		about: `Create an account (admins only). Its first API key is printed once:
hand it to the account's owner. A name is unique among the accounts of a
role. Run again with the same --idempotency-key, it creates nothing: it
shows the account the first run made, with a new API key for it, since
the first key's secret is shown only once.`,
		examples: `idlegrid account create --name acme-research --role renter
		idlegrid account create --name garage-gpus --role provider
		idlegrid account create --name acme-research --role renter --idempotency-key onboard-acme   # from a script: run twice, it creates once`,
	})
	r := c.env.remoteFlags(fs)
	name := fs.String("name", "", "the account's name (required)")
	role := fs.String("role", "", "renter, provider or admin (required)")
	key := fs.String("idempotency-key", "", "create at most once under this key: run again with it, the command shows the account the first run made, with a new API key, instead of making another (default: a new key each time)")
	asJSON := fs.Bool("json", false, "print JSON, including the key's secret")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if *name == "" {
		return usagef("--name is required, e.g. --name acme-research")
	} else if !idlegrid.Role(*role).Valid() {
		return usagef("--role must be renter, provider or admin, got %q", *role)
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	a, k, secret, replayed, err := cl.CreateAccountOnce(ctx, *name, idlegrid.Role(*role), orNewKey(key, "cli-account"))
	if err != nil {
		return createFailed(ctx, err, *key, *role)
	}
	if *asJSON {
		return printJSON(c.env.Out, createdAccount{Account: a, Key: k, Secret: secret, Replayed: replayed})
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already created under idempotency key %s: %s account %s (%s), not created again\n", *key, a.Role, a.ID, a.Name)
		fmt.Fprintf(c.env.Out, "its first API key's secret was shown once, so it has a new key, %s; revoke the one its owner does not use:\n"+
			"  idlegrid key ls --account %s, then idlegrid key revoke KEY_ID --account %s\n", k.ID, a.ID, a.ID)
	} else {
		fmt.Fprintf(c.env.Out, "created %s account %s (%s)\n", a.Role, a.ID, a.Name)
	}
	fmt.Fprintf(c.env.Out, "API key (shown once): %s\n", secret)
	if a.Role == idlegrid.RoleRenter && !replayed {
		fmt.Fprintf(c.env.Out, "add funds with: idlegrid account topup %s 100\n", a.ID)
	}
	return nil
}

// createFailed explains an account creation that failed: a name taken
// says what to do; one whose answer was lost may have been made all the
// same (answerLost), and the same key sent again says which.
func createFailed(ctx context.Context, err error, key, role string) error {
	var answered *idlegrid.Error
	switch {
	case errors.As(err, &answered) && answered.Code == idlegrid.ECONFLICT && answered.Field == "name":
		return withHint(err, "'idlegrid account ls --role "+role+"' lists the accounts and their names; pick another --name for a new one")
	case !answerLost(ctx, err):
		return err
	}
	return withHint(err, "it may have been created before the answer was lost: run the same command with --idempotency-key "+key+
		" to create it at most once (it shows the account if there is one)")
}

func (c *accountCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("account ls", help{
		usage: "idlegrid account ls [--role renter|provider|admin] [--limit N] [--after ACCOUNT_ID] [--json]",
		about: `List accounts, oldest first (admins only). A full page ends with the command
for the next one (--after the page's last account).`,
		examples: "idlegrid account ls\n idlegrid account ls --role provider --limit 50",
	})
	r := c.env.remoteFlags(fs)
	role := fs.String("role", "", "only accounts with this role: renter, provider or admin")
	f := idlegrid.AccountFilter{}
	fs.IntVar(&f.Limit, "limit", 1000, "at most this many accounts")
	fs.StringVar(&f.After, "after", "", "the accounts listed after this one: the last of the page before")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	} else if err := checkLimit(f.Limit, "accounts", 1000); err != nil {
		return err
	}
	if f.Role = idlegrid.Role(*role); *role != "" && !f.Role.Valid() {
		return usagef("--role: unknown role %q; use renter, provider or admin", *role)
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	accounts, err := cl.ListAccounts(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(accounts))
	}
	t := newTable(c.env.Out, "ID", "NAME", "ROLE", "CREATED")
	for _, a := range accounts {
		t.row(a.ID, a.Name, a.Role, a.CreatedAt.UTC().Format(time.RFC3339))
	}
	if err := t.flush(); err != nil || len(accounts) == 0 {
		return err
	}
	cmd := "idlegrid account ls"
	if *role != "" {
		cmd += " --role " + *role
	}
	return nextPageAfter(c.env.Out, cmd, len(accounts), f.Limit, accounts[len(accounts)-1].ID)
}

func (c *accountCommand) balance(ctx context.Context, args []string) error {
	fs := c.env.flags("account balance", help{
		usage: "idlegrid account balance [ID] [--json]",
		about: `Show a balance. Without an ID, your own; admins may name any account.
Available is spendable; held is in escrow for running leases; spent is what
you have been charged, for leases and inference. A provider's earnings are pending for the payout hold
after each settlement, then payable; a requested payout is in flight until
an operator settles it, then paid out.`,
		examples: "idlegrid account balance\n idlegrid account balance acct_abc123 --json",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 0, 1, "at most one account ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	b, err := cl.Balance(ctx, firstNonEmpty(args...))
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, b)
	}
	return printBalance(c.env, b)
}

func printBalance(e *env, b *idlegrid.Balance) error {
	t := newTable(e.Out, "ACCOUNT", "AVAILABLE", "HELD", "SPENT", "PENDING", "PAYABLE", "PAID OUT")
	t.row(b.AccountID, b.Available, b.Held, b.Spent, b.Pending, b.Payable, b.PaidOut)
	return t.flush()
}

func (c *accountCommand) topup(ctx context.Context, args []string) error {
	fs := c.env.flags("account topup", help{
		usage: "idlegrid account topup ID AMOUNT [--idempotency-key K] [--json]",
		about: `Add funds to a renter's account (admins only). AMOUNT is decimal, e.g. 100
or 12.50. Retrying with the same --idempotency-key never adds twice; by
default each call gets a fresh key.`,
		examples: "idlegrid account topup acct_abc123 100\n idlegrid account topup acct_abc123 12.50 --idempotency-key invoice-2026-11",
	})
	r := c.env.remoteFlags(fs)
	key := fs.String("idempotency-key", "", "makes a retried top-up a no-op (default: random)")
	asJSON := fs.Bool("json", false, "print the new balance as JSON")
	args, err := fs.parseArgs(args, 2, 2, "an account ID and an amount")
	if err != nil {
		return err
	}
	amount, err := idlegrid.ParseMicros(args[1])
	if err != nil {
		return usagef("AMOUNT: %v; write a decimal amount such as 100 or 12.50", err)
	} else if amount <= 0 {
		return usagef("AMOUNT must be positive, got %s", args[1])
	}
	if *key == "" {
		*key = idlegrid.NewID("cli-topup")
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	b, replayed, err := cl.TopUpOnce(ctx, args[0], amount, *key)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, b)
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already topped up under idempotency key %s: %s was not credited again\n", *key, args[0])
	} else {
		fmt.Fprintf(c.env.Out, "topped up %s by %s (idempotency key %s)\n", args[0], amount, *key)
	}
	return printBalance(c.env, b)
}

func (c *accountCommand) transfers(ctx context.Context, args []string) error {
	return listAccountRecords(ctx, c.env, accountRecords[*idlegrid.Transfer]{
		name: "transfers", one: "transfer", many: "transfers", limit: 100,
		help: help{
			usage: "idlegrid account transfers [ID] [--limit N] [--before TRANSFER_ID] [--json]",
			about: `List the ledger transfers that touch an account, newest first: top-ups,
escrow holds at placement, and settlements when leases end. Without an ID,
your own; admins may name any account. A full page ends with the command
for the next one (--before the page's last transfer).`,
			examples: "idlegrid account transfers\n idlegrid account transfers acct_abc123 --json\n idlegrid account transfers --limit 20 --before tr_1k8u7bk86760od68tjkhklaoi",
		},
		header: []string{"ID", "KIND", "AT", "LEASE", "ENTRIES"},
		row: func(tr *idlegrid.Transfer) []any {
			var entries []string
			for _, en := range tr.Entries {
				entries = append(entries, fmt.Sprintf("%s %s", en.Account, en.Amount))
			}
			return []any{tr.ID, tr.Kind, tr.CreatedAt.UTC().Format(time.RFC3339), orDash(tr.LeaseID), strings.Join(entries, "; ")}
		},
		id: func(tr *idlegrid.Transfer) string { return tr.ID },
		list: func(ctx context.Context, cl *client.Client, id string, limit int, before string) ([]*idlegrid.Transfer, error) {
			return cl.ListTransfers(ctx, idlegrid.TransferFilter{AccountID: id, Limit: limit, Before: before})
		},
	}, args)
}
