package cli

import (
	"context"
	"strings"

	"github.com/idlegrid/idlegrid/client"
)

// accountRecords is a listing of one account's records, newest first, a
// page at a time: its transfers, its notices. Without an ID it lists the
// caller's own; an admin may name any account.
type accountRecords[T any] struct {
	name      string // the subcommand: "transfers"
	one, many string // a record in words: "transfer", "transfers"
	limit     int    // the page when --limit is left out
	help      help
	header    []string
	row       func(T) []any
	id        func(T) string
	// list reads the page of accountID's records (empty: the caller's)
	// listed after before.
	list func(ctx context.Context, cl *client.Client, accountID string, limit int, before string) ([]T, error)
}

// listAccountRecords runs l's command with args.
func listAccountRecords[T any](ctx context.Context, e *env, l accountRecords[T], args []string) error {
	fs := e.flags("account "+l.name, l.help)
	r := e.remoteFlags(fs)
	limit := fs.Int("limit", l.limit, "at most this many "+l.many)
	before := fs.String("before", "", "the "+l.many+" listed after this one: the last of the page before")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 0, 1, "at most one account ID")
	if err != nil {
		return err
	} else if err := checkLimit(*limit, l.many, l.limit); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	id := firstNonEmpty(args...)
	rs, err := l.list(ctx, cl, id, *limit, *before)
	if err != nil {
		return err
	} else if len(rs) == 0 && id != "" { // none, or no such account
		if _, err := cl.FindAccount(ctx, id); err != nil {
			return err
		}
	}
	if *asJSON {
		return printJSON(e.Out, nonNil(rs))
	}
	if len(rs) == 0 {
		return e.noneListed(l.one, l.many, "")
	}
	t := newTable(e.Out, l.header...)
	for _, rec := range rs {
		t.row(l.row(rec)...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return nextPage(e.Out, strings.TrimSpace("idlegrid account "+l.name+" "+id), len(rs), *limit, l.id(rs[len(rs)-1]))
}
