package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// registryCommand is "idlegrid registry": a renter's logins to the private
// container registries its jobs' images are on.
type registryCommand struct{ env *env }

// registryPasswordEnv may hold the password for "registry login".
const registryPasswordEnv = "IDLEGRID_REGISTRY_PASSWORD"

func (c *registryCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("registry", `Your logins to private container registries. When one of your jobs starts,
the node it runs on is handed your login for its image's registry and pulls
the image with it, even when it has the image already, so that only renters
who may read an image run it. The server keeps passwords sealed and never
shows them again; the provider's machine holds them while it pulls, so use
a read-only pull token (docs/api.md, "Private images").`, []subcommand{
		{"login", "keep your login to a registry (replacing the one you had there)", func(a []string) error { return c.login(ctx, a) }},
		{"ls", "list your registry logins", func(a []string) error { return c.list(ctx, a) }},
		{"logout", "remove your login to a registry", func(a []string) error { return c.logout(ctx, a) }},
	}, args)
}

func (c *registryCommand) login(ctx context.Context, args []string) error {
	fs := c.env.flags("registry login", help{
		usage: "idlegrid registry login REGISTRY --username U --password-stdin [--json]",
		about: `Keep your login to REGISTRY: its host, as your images name it (ghcr.io,
nvcr.io, registry.example.com:5000; docker.io for Docker Hub). Your jobs whose
images are on it are pulled with it from now on. The password or token is
read from standard input (--password-stdin), or from ` + registryPasswordEnv + `;
never from the command line, where your shell's history would keep it.`,
		examples: "echo \"$GHCR_TOKEN\" | idlegrid registry login ghcr.io --username acme-bot --password-stdin\n" +
			" " + registryPasswordEnv + "=$HUB_TOKEN idlegrid registry login docker.io --username acme",
	})
	r := c.env.remoteFlags(fs)
	username := fs.String("username", "", "the registry user name (required)")
	fs.StringVar(username, "u", "", "short for --username")
	fromStdin := fs.Bool("password-stdin", false, "read the password or token from standard input")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one registry, e.g. ghcr.io")
	if err != nil {
		return err
	} else if err := checkRegistryArg(args[0]); err != nil {
		return err
	} else if *username == "" {
		return usagef("--username is required, e.g. idlegrid registry login %s --username acme-bot --password-stdin", args[0])
	}
	password, err := c.password(*fromStdin)
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	l, err := cl.PutRegistryLogin(ctx, idlegrid.NormalRegistry(args[0]), *username, password)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, l)
	}
	fmt.Fprintf(c.env.Out, "your jobs' images on %s are pulled as %s from now on\n", l.Registry, l.Username)
	return nil
}

// checkRegistryArg refuses a REGISTRY that names no registry host, such
// as a URL with a path ("ghcr.io/v2", "https://ghcr.io/v2/"), an image
// or a repository ("ghcr.io/acme"): a login is kept for a host, as
// images name it; the host itself is suggested where there is one.
func checkRegistryArg(arg string) error {
	if _, err := idlegrid.ParseRegistry(idlegrid.NormalRegistry(arg)); err == nil {
		return nil
	}
	msg := fmt.Sprintf("REGISTRY: %q is not a registry host; give the host alone, as your images name it, e.g. ghcr.io or registry.example.com:5000", arg)
	rest := strings.TrimPrefix(strings.TrimPrefix(arg, "https://"), "http://")
	if host, _, ok := strings.Cut(rest, "/"); ok {
		if reg, err := idlegrid.ParseRegistry(host); err == nil {
			msg += fmt.Sprintf(" (here %s, without /%s)", reg, strings.TrimSuffix(rest[len(host)+1:], "/"))
		}
	}
	return usagef("%s", msg)
}

// password reads the login's password: from standard input, its first line,
// or from the environment.
func (c *registryCommand) password(fromStdin bool) (string, error) {
	if !fromStdin {
		if p := c.env.getenv(registryPasswordEnv); p != "" {
			return p, nil
		}
		return "", usagef("give the password on standard input with --password-stdin, e.g. echo \"$TOKEN\" | idlegrid registry login ghcr.io -u acme-bot --password-stdin, or in %s", registryPasswordEnv)
	}
	line, err := bufio.NewReader(io.LimitReader(c.env.In, 1<<16)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read the password from standard input: %w", err)
	}
	if p := strings.TrimRight(line, "\r\n"); p != "" {
		return p, nil
	}
	return "", usagef("--password-stdin: standard input held no password")
}

func (c *registryCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("registry ls", help{
		usage:    "idlegrid registry ls [--account ID] [--json]",
		about:    "List your registry logins: the registry and user name, never the password.",
		examples: "idlegrid registry ls\n idlegrid registry ls --account acct_abc123   # an admin, another account's",
	})
	r := c.env.remoteFlags(fs)
	account := fs.String("account", "", "another account's (admins)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := fs.parseArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	logins, err := cl.ListRegistryLogins(ctx, *account)
	if err != nil {
		return err
	} else if len(logins) == 0 && *account != "" { // none, or no such account
		if _, err := cl.FindAccount(ctx, *account); err != nil {
			return err
		}
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(logins))
	}
	if len(logins) == 0 && *account != "" {
		_, err := fmt.Fprintf(c.env.Out, "no registry logins: %s's jobs pull their images without one\n", *account)
		return err
	} else if len(logins) == 0 {
		fmt.Fprintln(c.env.Out, "no registry logins: your jobs pull their images without one (idlegrid registry login REGISTRY to add one)")
		return nil
	}
	t := newTable(c.env.Out, "REGISTRY", "USERNAME", "SINCE", "UPDATED")
	for _, l := range logins {
		t.row(l.Registry, l.Username, l.CreatedAt.UTC().Format(time.RFC3339), l.UpdatedAt.UTC().Format(time.RFC3339))
	}
	return t.flush()
}

func (c *registryCommand) logout(ctx context.Context, args []string) error {
	fs := c.env.flags("registry logout", help{
		usage: "idlegrid registry logout REGISTRY [--account ID]",
		about: `Remove your login to REGISTRY. Your jobs that start from now on pull their
images there without one. Admins may remove another account's login with
--account, e.g. one whose password leaked.`,
		examples: "idlegrid registry logout ghcr.io\n idlegrid registry logout ghcr.io --account acct_abc123",
	})
	r := c.env.remoteFlags(fs)
	accountID := fs.String("account", "", "the account whose login to remove (admins); yours when empty")
	args, err := fs.parseArgs(args, 1, 1, "one registry, e.g. ghcr.io")
	if err != nil {
		return err
	} else if err := checkRegistryArg(args[0]); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	registry := idlegrid.NormalRegistry(args[0])
	err = cl.RemoveRegistryLogin(ctx, *accountID, registry)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return withHint(err, "'idlegrid registry ls' lists the registries you keep a login for (admins: --account ID, another's)")
	} else if err != nil {
		return err
	}
	whose := "your"
	if *accountID != "" {
		whose = *accountID + "'s"
	}
	fmt.Fprintf(c.env.Out, "removed %s login to %s\n", whose, registry)
	return nil
}
