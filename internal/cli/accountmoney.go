package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// accountView is the --json form of "idlegrid account": what the account
// holder needs to see of its money.
type accountView struct {
	Account *idlegrid.Account   `json:"account"`
	Balance *idlegrid.Balance   `json:"balance"`
	Spend   *client.SpendReport `json:"spend,omitempty"`   // renters: this month and the limits
	Notices []*idlegrid.Notice  `json:"notices,omitempty"` // renters, the latest
	Payouts []*idlegrid.Payout  `json:"payouts,omitempty"` // providers, the latest
}

func (c *accountCommand) show(ctx context.Context, args []string) error {
	fs := c.env.flags("account show", help{
		usage: "idlegrid account show [ID] [--json]",
		about: `Show your money at a glance ('idlegrid account' alone does the same). For a renter: the balance available, the
money held in escrow for running leases, what this month cost so far and the
spend limits, and the latest notices. For a provider: earnings pending (inside
the payout hold) and payable, payouts in flight and paid out, and the latest
payouts. Admins may name any account.`,
		examples: "idlegrid account\n idlegrid account show acct_abc123 --json",
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
	v, err := loadAccountView(ctx, cl, firstNonEmpty(args...))
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, v)
	}
	return c.printAccountView(v)
}

func loadAccountView(ctx context.Context, cl *client.Client, id string) (*accountView, error) {
	a, err := findAccount(ctx, cl, id)
	if err != nil {
		return nil, err
	}
	v := &accountView{Account: a}
	if v.Balance, err = cl.Balance(ctx, id); err != nil {
		return nil, err
	}
	switch a.Role {
	case idlegrid.RoleRenter:
		if v.Spend, err = cl.SpendLimits(ctx, id); err != nil {
			return nil, err
		}
		if v.Notices, err = cl.ListNotices(ctx, idlegrid.NoticeFilter{AccountID: id, Limit: 5}); err != nil {
			return nil, err
		}
	case idlegrid.RoleProvider:
		if v.Payouts, err = cl.ListPayouts(ctx, idlegrid.PayoutFilter{ProviderID: a.ID, Limit: 5}); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// findAccount returns the caller's account, or (for admins) the one named.
func findAccount(ctx context.Context, cl *client.Client, id string) (*idlegrid.Account, error) {
	me, err := cl.Me(ctx)
	if err != nil || id == "" || id == me.ID {
		return me, err
	}
	return cl.FindAccount(ctx, id)
}

func (c *accountCommand) printAccountView(v *accountView) error {
	out, b := c.env.Out, v.Balance
	fmt.Fprintf(out, "%s account %s (%s)\n\n", v.Account.Role, v.Account.ID, v.Account.Name)
	switch v.Account.Role {
	case idlegrid.RoleRenter:
		t := newTable(out, "AVAILABLE", "HELD", "SPENT THIS MONTH", "SPENT IN ALL")
		t.row(b.Available, b.Held, v.Spend.Spend.ChargedMicros, b.Spent)
		if err := t.flush(); err != nil {
			return err
		}
		if r := v.Spend.Spend.RefundedMicros; r > 0 {
			fmt.Fprintf(out, "This month's spend, and its limits, are net of %s that upheld disputes refunded; spent in all is what was charged.\n", r)
		}
		if len(v.Spend.Limits) > 0 {
			fmt.Fprintf(out, "\nSpend limits in %s:\n", v.Spend.Month)
			t := newTable(out, "SCOPE", "KEY", "LIMIT", "CHARGED", "HELD", "LEFT")
			for _, l := range v.Spend.Limits {
				t.row(l.Scope, orDash(l.KeyID), l.LimitMicros, l.Spend.ChargedMicros, l.Spend.HeldMicros, max(l.LimitMicros-l.Spend.Used(), 0))
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		if len(v.Notices) > 0 {
			fmt.Fprintln(out, "\nLatest notices:")
			for _, n := range v.Notices {
				fmt.Fprintf(out, "  %s  %s\n", n.CreatedAt.UTC().Format(time.RFC3339), n.Message)
			}
		}
	case idlegrid.RoleProvider:
		t := newTable(out, "PENDING", "PAYABLE", "PAYOUT IN FLIGHT", "PAID OUT", "BOND")
		t.row(b.Pending, b.Payable, b.PayoutInFlight, b.PaidOut, b.Bond)
		if err := t.flush(); err != nil {
			return err
		}
		if len(v.Payouts) > 0 {
			fmt.Fprintln(out, "\nLatest payouts:")
			if err := printPayouts(c.env, v.Payouts); err != nil {
				return err
			}
		}
		if b.Payable > 0 {
			fmt.Fprintf(out, "\nrequest a payout with: idlegrid payout request %s\n", units(b.Payable))
		}
	default:
		return printBalance(c.env, b)
	}
	return nil
}

// units shows an amount as a bare decimal, as the CLI takes it back.
func units(m idlegrid.Micros) string { return m.String()[1:] }

func (c *accountCommand) statement(ctx context.Context, args []string) error {
	fs := c.env.flags("account statement", help{
		usage: "idlegrid account statement [ID] [--month 2026-11] [--csv|--json]",
		about: `Print a month's statement (UTC). A renter's has a line per job and locked
price: GPU-hours, $/GPU-hour and the total. A provider's has a line per node:
hours sold, sales, the platform's fees and the earnings. Each line adds up
settlements, which are in 'idlegrid account transfers'. Metered inference
requests follow, a line per model (a provider's per node and model), and the
total adds them in. The disputes upheld in the month follow: the penalties
taken from a provider's bond, or paid to a renter, and the refunds (in the
CSV, rows of their own, with zero sales, and columns after the others).
Without --month, this month so far. Admins may name any account.`,
		examples: "idlegrid account statement --month 2026-11\n idlegrid account statement --month 2026-11 --csv > november.csv",
	})
	r := c.env.remoteFlags(fs)
	month := fs.String("month", "", "the month, e.g. 2026-11 (default: this month)")
	asCSV := fs.Bool("csv", false, "print CSV")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 1, "at most one account ID"); err != nil {
		return err
	} else if *asCSV && *asJSON {
		return usagef("--csv and --json do not go together; pick one")
	}
	if *month == "" {
		*month = time.Now().UTC().Format("2006-01")
	} else if _, _, err := idlegrid.ParseMonth(*month); err != nil {
		return usagef("--month: must be a month such as 2026-11, got %q", *month)
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	id := firstNonEmpty(args...)
	if *asCSV {
		b, err := cl.StatementCSV(ctx, id, *month)
		if err != nil {
			return statementIDMissing(id, err)
		}
		_, err = c.env.Out.Write(b)
		return err
	}
	s, err := cl.Statement(ctx, id, *month)
	if err != nil {
		return statementIDMissing(id, err)
	}
	if *asJSON {
		return printJSON(c.env.Out, s)
	}
	return printStatement(c.env, s)
}

func printStatement(e *env, s *idlegrid.Statement) error {
	fmt.Fprintf(e.Out, "statement of %s %s for %s\n\n", s.Role, s.AccountID, s.Month)
	if s.Role == idlegrid.RoleProvider {
		t := newTable(e.Out, "NODE", "NAME", "MODEL", "LEASES", "GPU-HOURS", "REQUESTS", "SALES", "FEES", "EARNINGS")
		for _, l := range s.Lines {
			t.row(l.NodeID, orDash(l.NodeName), "-", l.Leases, l.GPUHours, "-", l.ChargedMicros, l.FeesMicros, l.EarningsMicros)
		}
		for _, x := range s.Inference {
			t.row(x.NodeID, orDash(x.NodeName), x.Model, "-", "-", x.Requests, x.ChargedMicros, x.FeesMicros, x.EarningsMicros)
		}
		t.row("total", "", "", s.Total.Leases, s.Total.GPUHours, s.Total.Requests, s.Total.ChargedMicros, s.Total.FeesMicros, s.Total.EarningsMicros)
		if err := t.flush(); err != nil {
			return err
		}
		return printPenalties(e, s, "penalties taken from the bond, and refunds to renters taken from the earnings above", "earned")
	}
	t := newTable(e.Out, "JOB", "NAME", "LEASES", "GPU-HOURS", "REQUESTS", "PRICE", "TOTAL")
	for _, l := range s.Lines {
		t.row(l.JobID, orDash(l.JobName), l.Leases, l.GPUHours, "-", perGPUHour(l.PriceMicrosPerGPUHour), l.ChargedMicros)
	}
	for _, x := range s.Inference {
		t.row("inference", x.Model, "-", "-", x.Requests, perMTokens(x.ChargedMicros, x.InputTokens+x.OutputTokens), x.ChargedMicros)
	}
	t.row("total", "", s.Total.Leases, s.Total.GPUHours, s.Total.Requests, "", s.Total.ChargedMicros)
	if err := t.flush(); err != nil {
		return err
	}
	return printPenalties(e, s, "penalties and refunds paid to you by providers for the harm done (added to your balance)", "charged")
}

// printPenalties lists a statement's penalties under title, if any, and
// what its sales (what it calls them: earned, charged) came to net of
// their refunds.
func printPenalties(e *env, s *idlegrid.Statement, title, sales string) error {
	if len(s.Penalties) == 0 {
		return nil
	}
	fmt.Fprintf(e.Out, "\n%s:\n", title)
	t := newTable(e.Out, "DISPUTE", "OFFENCE", "NODE", "LEASE", "UPHELD", "PENALTY", "REFUND")
	var penalties idlegrid.Micros
	for _, p := range s.Penalties {
		t.row(p.DisputeID, p.Offence, orDash(p.NodeID), orDash(p.LeaseID), p.UpheldAt.UTC().Format(time.RFC3339), p.PenaltyMicros, p.RefundMicros)
		penalties += p.PenaltyMicros
	}
	t.row("total", "", "", "", "", penalties, s.RefundedMicros)
	if err := t.flush(); err != nil {
		return err
	}
	if s.RefundedMicros > 0 {
		fmt.Fprintf(e.Out, "\nnet of refunds: %s %s\n", s.NetMicros, sales)
	}
	return nil
}

func (c *accountCommand) limit(ctx context.Context, args []string) error {
	fs := c.env.flags("account limit", help{
		usage: "idlegrid account limit ID AMOUNT|none [--json]",
		about: `Set what a renter account may spend in a calendar month (UTC), or lift the
limit with "none" (admins only). A job whose escrow hold would go over the
limit waits, queued, with the reason; running leases are stopped, bronze ones
with their notice, when the limit would be reached; the inference gateway
refuses requests the limit cannot cover. Spend is the charges of leases that
ended this month and of this month's inference requests, less what upheld
disputes refunded of them, plus the holds of live leases. A renter limits
its own API keys with 'idlegrid key limit'.`,
		examples: "idlegrid account limit acct_abc123 500\n idlegrid account limit acct_abc123 none",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 2, 2, "an account ID and an amount (or none)")
	if err != nil {
		return err
	}
	limit, err := parseLimit(args[1])
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	st, err := cl.SetAccountLimit(ctx, args[0], limit)
	if err != nil {
		return err
	}
	return printLimit(c.env, "account "+args[0], st, *asJSON)
}

// parseLimit reads a spend limit: a decimal amount, or "none" (nil).
func parseLimit(s string) (*idlegrid.Micros, error) {
	if s == "none" {
		return nil, nil
	}
	m, err := idlegrid.ParseMicros(s)
	if err != nil || m < 0 {
		return nil, usagef("AMOUNT: must be a decimal amount such as 100 or 12.50, or none to lift the limit; got %q", s)
	}
	return &m, nil
}

func printLimit(e *env, what string, st *idlegrid.SpendLimitStatus, asJSON bool) error {
	if asJSON {
		return printJSON(e.Out, st)
	}
	if st == nil {
		fmt.Fprintf(e.Out, "lifted the spend limit of %s\n", what)
		return nil
	}
	refunded := ""
	if r := st.Spend.RefundedMicros; r > 0 {
		refunded = fmt.Sprintf(" net of %s refunded", r)
	}
	fmt.Fprintf(e.Out, "%s may spend %s a month; %s used in %s (%s charged%s, %s held)\n",
		what, st.LimitMicros, st.Spend.Used(), st.Month, st.Spend.ChargedMicros, refunded, st.Spend.HeldMicros)
	return nil
}

func (c *accountCommand) notices(ctx context.Context, args []string) error {
	return listAccountRecords(ctx, c.env, accountRecords[*idlegrid.Notice]{
		name: "notices", one: "notice", many: "notices", limit: 50,
		help: help{
			usage: "idlegrid account notices [ID] [--limit N] [--before NOTICE_ID] [--json]",
			about: `List what the market told an account, newest first: leases given notice or
stopped because the balance or a spend limit would not have lasted. A full
page ends with the command for the next one (--before the page's last notice).`,
			examples: "idlegrid account notices\n idlegrid account notices --limit 20 --before notice_abc123",
		},
		header: []string{"ID", "AT", "KIND", "JOB", "LEASE", "MESSAGE"},
		row: func(n *idlegrid.Notice) []any {
			return []any{n.ID, n.CreatedAt.UTC().Format(time.RFC3339), n.Kind, orDash(n.JobID), orDash(n.LeaseID), n.Message}
		},
		id: func(n *idlegrid.Notice) string { return n.ID },
		list: func(ctx context.Context, cl *client.Client, id string, limit int, before string) ([]*idlegrid.Notice, error) {
			return cl.ListNotices(ctx, idlegrid.NoticeFilter{AccountID: id, Limit: limit, Before: before})
		},
	}, args)
}

// statementIDMissing is err from asking for the statement of id, said as
// the missing argument it is when the caller named no account and the
// server refuses the account it took (an admin's own: admins have none).
func statementIDMissing(id string, err error) error {
	var ie *idlegrid.Error
	if id != "" || !errors.As(err, &ie) || ie.Code != idlegrid.EINVALID || ie.Field != "account_id" || len(ie.More) > 0 {
		return err
	}
	return usagef("%s: give the renter's or provider's account ID, e.g. idlegrid account statement acct_abc123 ('idlegrid account ls' lists them)", ie.Message)
}
