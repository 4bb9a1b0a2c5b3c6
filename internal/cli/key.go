package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// keyCommand is "idlegrid key": the caller's own API keys.
type keyCommand struct{ env *env }

func (c *keyCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("key", "API keys authenticate you to the server. Each account may have several.", []subcommand{
		{"create", "create a new API key for your account", func(a []string) error { return c.create(ctx, a) }},
		{"ls", "list your API keys", func(a []string) error { return c.list(ctx, a) }},
		{"revoke", "revoke an API key", func(a []string) error { return c.revoke(ctx, a) }},
	}, args)
}

// createdKey is the --json form of "key create".
type createdKey struct {
	Key    *idlegrid.APIKey `json:"key"`
	Secret string           `json:"secret"`
}

func (c *keyCommand) create(ctx context.Context, args []string) error {
	fs := c.env.flags("key create", help{
		usage:    "idlegrid key create --name N [--json]",
		about:    "Create another API key for your own account. Its secret is shown once.",
		examples: "idlegrid key create --name laptop",
	})
	r := c.env.remoteFlags(fs)
	name := fs.String("name", "", "a name to recognise the key by (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if *name == "" {
		return usagef("--name is required, e.g. idlegrid key create --name laptop")
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	k, secret, err := cl.CreateAPIKey(ctx, *name)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, createdKey{Key: k, Secret: secret})
	}
	fmt.Fprintf(c.env.Out, "created API key %s (%s)\nsecret (shown once): %s\n", k.ID, k.Name, secret)
	return nil
}

func (c *keyCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("key ls", help{
		usage:    "idlegrid key ls [--json]",
		about:    "List your API keys; their secrets are never shown again.",
		examples: "idlegrid key ls",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	keys, err := cl.ListAPIKeys(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(keys))
	}
	t := newTable(c.env.Out, "ID", "NAME", "PREFIX", "CREATED", "REVOKED")
	for _, k := range keys {
		t.row(k.ID, k.Name, k.Prefix+"…", k.CreatedAt.UTC().Format(time.RFC3339), stamp(k.RevokedAt))
	}
	return t.flush()
}

func (c *keyCommand) revoke(ctx context.Context, args []string) error {
	fs := c.env.flags("key revoke", help{
		usage:    "idlegrid key revoke ID",
		about:    "Revoke one of your API keys. Requests with it fail from now on.",
		examples: "idlegrid key revoke key_abc123",
	})
	r := c.env.remoteFlags(fs)
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 1, 1, "one key ID"); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	if err := cl.RevokeAPIKey(ctx, args[0]); err != nil {
		return err
	}
	fmt.Fprintf(c.env.Out, "revoked API key %s\n", args[0])
	return nil
}
