package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// keyCommand is "idlegrid key": the caller's own API keys.
type keyCommand struct{ env *env }

func (c *keyCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("key", "API keys authenticate you to the server. Each account may have several.", []subcommand{
		{"create", "create a new API key for your account", func(a []string) error { return c.create(ctx, a) }},
		{"ls", "list your API keys", func(a []string) error { return c.list(ctx, a) }},
		{"revoke", "revoke an API key", func(a []string) error { return c.revoke(ctx, a) }},
		{"limit", "set or lift what a key's jobs and inference requests may spend a month", func(a []string) error { return c.limit(ctx, a) }},
		{"routing", "show or set how a key's inference requests choose providers", func(a []string) error { return c.routing(ctx, a) }},
	}, args)
}

// createdKey is the --json form of "key create".
type createdKey struct {
	Key    *idlegrid.APIKey           `json:"key"`
	Secret string                     `json:"secret"`
	Limit  *idlegrid.SpendLimitStatus `json:"spend_limit,omitempty"`
	// Replayed is true when the key was made before under the
	// --idempotency-key, and Secret is its new one.
	Replayed bool `json:"replayed,omitempty"`
}

// createSecretFailed explains a failed creation of an API key or a join
// token (what: "key" or "token"): one whose answer was lost may have been
// made all the same, and the same idempotency key sent again says which.
func createSecretFailed(ctx context.Context, err error, what, key string) error {
	if !answerLost(ctx, err) {
		return err
	}
	return withHint(err, "it may have been created before the answer was lost: run the same command with --idempotency-key "+key+
		" to create it at most once (it shows the "+what+" with a new secret if there is one)")
}

func (c *keyCommand) create(ctx context.Context, args []string) error {
	fs := c.env.flags("key create", help{
		usage: "idlegrid key create --name N [--access all|use|read] [--spend-limit AMOUNT] [--idempotency-key K] [--json]",
		about: `Create another API key for your own account. Its secret is shown once.
--access says what the key may do of what your account may: all (the
default), use (all but manage the account: no keys, spend limits, key
routing, registry logins, join tokens, payouts or bonds) or read (only
reads). Only a key with access all creates keys.
--spend-limit caps what the key's jobs and inference requests may spend in a
calendar month (renters); see 'idlegrid key limit'.
Run again with the same --idempotency-key, it creates nothing: it shows the
key the first run made with a new secret, the first one's no longer working.`,
		examples: "idlegrid key create --name laptop\n idlegrid key create --name ci --access use --spend-limit 100\n idlegrid key create --name grafana --access read" +
			"\n idlegrid key create --name ci --idempotency-key ci-setup   # from a script: run twice, it creates once; the last run's secret is the one that works",
	})
	r := c.env.remoteFlags(fs)
	name := fs.String("name", "", "a name to recognise the key by (required)")
	access := fs.String("access", "all", "what the key may do: all, use or read")
	spendLimit := fs.String("spend-limit", "", "the most the key's jobs and inference requests may spend a month, e.g. 100")
	key := fs.String("idempotency-key", "", "create at most once under this key: run again with it, the command shows the key the first run made, with a new secret (default: a fresh one each run)")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if *name == "" {
		return usagef("--name is required, e.g. idlegrid key create --name laptop")
	} else if *access = strings.ToLower(*access); !idlegrid.Access(*access).Valid() {
		return usagef("--access: want all, use or read, got %q", *access)
	}
	var limit *idlegrid.Micros
	if *spendLimit != "" {
		if limit, err = parseLimit(*spendLimit); err != nil || limit == nil {
			return usagef("--spend-limit: must be a decimal amount such as 100 or 12.50, got %q", *spendLimit)
		} else if *access == string(idlegrid.AccessRead) {
			return usagef("--spend-limit: a key of access read spends nothing; leave it out, or give the key access use")
		}
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	k, secret, replayed, err := cl.CreateAPIKeyOnce(ctx, *name, keyAccess(*access), orNewKey(key, "cli-key"))
	if err != nil {
		return createSecretFailed(ctx, err, "key", *key)
	}
	out := createdKey{Key: k, Secret: secret, Replayed: replayed}
	if limit != nil {
		// The secret exists only here, so nothing can spend with the key
		// before its limit is set.
		if out.Limit, err = cl.SetKeyLimit(ctx, k.ID, limit); err != nil {
			return withHint(err, fmt.Sprintf("the key %s was created without its limit; revoke it or set it with 'idlegrid key limit %s AMOUNT'", k.ID, k.ID))
		}
	}
	if *asJSON {
		return printJSON(c.env.Out, out)
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already created under idempotency key %s: API key %s (%s), access %s, not created again; its secret is new, the first no longer works\n",
			*key, k.ID, k.Name, k.Access)
	} else {
		fmt.Fprintf(c.env.Out, "created API key %s (%s), access %s\n", k.ID, k.Name, k.Access)
	}
	fmt.Fprintf(c.env.Out, "secret (shown once): %s\n", secret)
	if out.Limit != nil {
		fmt.Fprintf(c.env.Out, "its jobs may spend %s a month\n", out.Limit.LimitMicros)
	}
	return nil
}

func (c *keyCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("key ls", help{
		usage:    "idlegrid key ls [--account ID] [--json]",
		about:    "List your API keys; their secrets are never shown again. An admin may list another account's.",
		examples: "idlegrid key ls\n idlegrid key ls --account acct_abc123   # an admin, before revoking a leaked key",
	})
	r := c.env.remoteFlags(fs)
	account := fs.String("account", "", "the account whose keys to list (admins); default your own")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	keys, err := cl.ListAPIKeys(ctx, *account)
	if err != nil {
		return err
	}
	limits := map[string]*idlegrid.SpendLimitStatus{}
	if rep, err := cl.SpendLimits(ctx, *account); err == nil {
		for _, l := range rep.Limits {
			if l.Scope == idlegrid.SpendKey {
				limits[l.KeyID] = l
			}
		}
	}
	if *asJSON {
		out := make([]listedKey, len(keys))
		for i, k := range keys {
			out[i] = listedKey{APIKey: k, SpendLimit: limits[k.ID]}
		}
		return printJSON(c.env.Out, out)
	}
	t := newTable(c.env.Out, "ID", "NAME", "ACCESS", "PREFIX", "CREATED", "REVOKED", "SPEND LIMIT")
	for _, k := range keys {
		limit := "-"
		if l := limits[k.ID]; l != nil {
			limit = fmt.Sprintf("%s (%s used)", l.LimitMicros, l.Spend.Used())
		}
		t.row(k.ID, k.Name, orDash(string(k.Access)), k.Prefix+"…", k.CreatedAt.UTC().Format(time.RFC3339), stamp(k.RevokedAt), limit)
	}
	return t.flush()
}

// listedKey is a key as 'key ls --json' prints it: with its monthly spend
// limit and this month's spend against it, when it has one.
type listedKey struct {
	*idlegrid.APIKey
	SpendLimit *idlegrid.SpendLimitStatus `json:"spend_limit,omitempty"`
}

// keyAccess is the access to ask for: "" for all, the server's default, so
// that a server older than accesses still makes the key.
func keyAccess(flag string) idlegrid.Access {
	if a := idlegrid.Access(flag); a != idlegrid.AccessAll {
		return a
	}
	return ""
}

func (c *keyCommand) revoke(ctx context.Context, args []string) error {
	fs := c.env.flags("key revoke", help{
		usage: "idlegrid key revoke ID [--account ACCOUNT] [--yes]",
		about: `Revoke one of your API keys, or, as an admin, another account's (a leaked key).
Requests with it fail from now on. Revoking the key this command signs in
with locks this command out: it asks first on a terminal, and elsewhere
revokes it only with --yes.`,
		examples: "idlegrid key revoke key_abc123\n idlegrid key revoke key_abc123 --account acct_abc123   # an admin",
	})
	r := c.env.remoteFlags(fs)
	account := fs.String("account", "", "the account the key is of (admins); default your own")
	yes := fs.Bool("yes", false, "revoke the key this command signs in with without asking")
	args, err := fs.parseArgs(args, 1, 1, "one key ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	if !*yes {
		if err := c.confirmRevoke(ctx, cl, args[0]); err != nil {
			return err
		}
	}
	if err := cl.RevokeAPIKey(ctx, *account, args[0]); err != nil {
		return err
	}
	fmt.Fprintf(c.env.Out, "revoked API key %s\n", args[0])
	return nil
}

// confirmRevoke asks before revoking the key the command signs in with,
// which would lock it out; any other key is revoked without asking.
func (c *keyCommand) confirmRevoke(ctx context.Context, cl *client.Client, id string) error {
	inUse, err := cl.KeyID(ctx)
	if err != nil || inUse != id {
		return err
	}
	fmt.Fprintf(c.env.Err, "API key %s is the key this command signs in with: once it is revoked, it is refused, here and wherever else it is set\n", id)
	return c.env.confirm("revoke it?",
		fmt.Sprintf("revoked nothing: %s is the key in use; revoke it with --yes (idlegrid key revoke %s --yes), after making another (idlegrid key create)", id, id),
		"revoked nothing")
}

func (c *keyCommand) limit(ctx context.Context, args []string) error {
	fs := c.env.flags("key limit", help{
		usage: "idlegrid key limit ID AMOUNT|none [--json]",
		about: `Set what the jobs and inference requests of one of your API keys may spend
in a calendar month (UTC), or lift the limit with "none". A job whose escrow
hold would go over the limit waits, queued, with the reason; running leases
are stopped, bronze ones with their notice, when the limit would be reached;
the inference gateway refuses requests the limit cannot cover.`,
		examples: "idlegrid key limit key_abc123 100\n idlegrid key limit key_abc123 none",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 2, 2, "a key ID and an amount (or none)")
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
	st, err := cl.SetKeyLimit(ctx, args[0], limit)
	if err != nil {
		return err
	}
	return printLimit(c.env, "API key "+args[0], st, *asJSON)
}
