package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// tokenCommand is "idlegrid token": join tokens, with which a provider's
// agents join its fleet.
type tokenCommand struct{ env *env }

func (c *tokenCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("token", "Join tokens let a provider's agents join its fleet as new nodes.", []subcommand{
		{"create", "create a join token", func(a []string) error { return c.create(ctx, a) }},
		{"ls", "list your join tokens", func(a []string) error { return c.list(ctx, a) }},
		{"revoke", "revoke a join token", func(a []string) error { return c.revoke(ctx, a) }},
	}, args)
}

// createdToken is the --json form of "token create".
type createdToken struct {
	Token  *idlegrid.JoinToken `json:"token"`
	Secret string              `json:"secret"`
	// Replayed is true when the token was made before under the
	// --idempotency-key, and Secret is its new one.
	Replayed bool `json:"replayed,omitempty"`
}

func (c *tokenCommand) create(ctx context.Context, args []string) error {
	fs := c.env.flags("token create", help{
		usage: "idlegrid token create --name N [--max-uses 1] [--ttl 24h] [--idempotency-key K] [--json]",
		about: `Create a join token (providers). Its secret is shown once: give it to
'idlegrid agent --join-token' on the machine that should join. Run again
with the same --idempotency-key, it creates nothing: it shows the token the
first run made with a new secret, the first one's no longer working.`,
		examples: `idlegrid token create --name rack-3
		idlegrid token create --name fleet --max-uses 20 --ttl 168h
		idlegrid token create --name rack-4 --idempotency-key provision-rack-4   # run twice, it creates once; the last run's secret is the one that works`,
	})
	r := c.env.remoteFlags(fs)
	name := fs.String("name", "", "a name to recognise the token by (required)")
	maxUses := fs.Int("max-uses", 1, "how many nodes may join with it, 1 to 10000 (0 means 1)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long it stays valid")
	key := fs.String("idempotency-key", "", "create at most once under this key: run again with it, the command shows the token the first run made, with a new secret (default: a fresh one each run)")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if *name == "" {
		return usagef("--name is required, e.g. idlegrid token create --name rack-3")
	} else if *maxUses < 0 {
		return usagef("--max-uses must not be negative")
	} else if *ttl <= 0 {
		return usagef("--ttl must be positive, e.g. 24h")
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	tok, secret, replayed, err := cl.CreateJoinTokenOnce(ctx, *name, *maxUses, *ttl, orNewKey(key, "cli-token"))
	if err != nil {
		return createSecretFailed(ctx, err, "token", *key)
	}
	if *asJSON {
		return printJSON(c.env.Out, createdToken{Token: tok, Secret: secret, Replayed: replayed})
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already created under idempotency key %s: join token %s (%s), not created again; its secret is new, the first no longer works\n",
			*key, tok.ID, tok.Name)
	} else {
		fmt.Fprintf(c.env.Out, "created join token %s (%s), valid until %s\n", tok.ID, tok.Name, tok.ExpiresAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(c.env.Out, "secret (shown once): %s\n", secret)
	fmt.Fprintf(c.env.Out, "on the new node: idlegrid agent --config agent.yaml --join-token %s\n", secret)
	return nil
}

func (c *tokenCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("token ls", help{
		usage:    "idlegrid token ls [--json]",
		about:    "List your join tokens; their secrets are never shown again.",
		examples: "idlegrid token ls",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	toks, err := cl.ListJoinTokens(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(toks))
	}
	if len(toks) == 0 {
		return c.env.noneListed("join token", "join tokens", "create one with 'idlegrid token create --name NAME'")
	}
	now := time.Now()
	t := newTable(c.env.Out, "ID", "NAME", "PREFIX", "USES", "EXPIRES", "STATUS")
	for _, tok := range toks {
		uses := fmt.Sprintf("%d/%d", tok.Uses, tok.MaxUses)
		if tok.MaxUses == 0 {
			uses = fmt.Sprintf("%d/unlimited", tok.Uses)
		}
		status := "usable"
		if err := tok.Usable(now); err != nil {
			status = "unusable"
			if tok.RevokedAt != nil {
				status = "revoked"
			} else if !now.Before(tok.ExpiresAt) {
				status = "expired"
			} else {
				status = "used up"
			}
		}
		t.row(tok.ID, tok.Name, tok.Prefix+"…", uses, tok.ExpiresAt.UTC().Format(time.RFC3339), status)
	}
	return t.flush()
}

func (c *tokenCommand) revoke(ctx context.Context, args []string) error {
	fs := c.env.flags("token revoke", help{
		usage:    "idlegrid token revoke ID",
		about:    "Revoke a join token: no more nodes can join with it. Nodes that already joined stay.",
		examples: "idlegrid token revoke jt_abc123",
	})
	r := c.env.remoteFlags(fs)
	args, err := fs.parseArgs(args, 1, 1, "one token ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	if err := cl.RevokeJoinToken(ctx, args[0]); err != nil {
		return err
	}
	fmt.Fprintf(c.env.Out, "revoked join token %s\n", args[0])
	return nil
}
