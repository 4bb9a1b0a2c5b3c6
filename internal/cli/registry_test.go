package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

func TestRegistryCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rs, err := startServer(ctx, serveConfig{listen: "127.0.0.1:0", dsn: filepath.Join(dir, "idlegrid.db"),
		adminKeyFile: filepath.Join(dir, "admin.key"), logger: slog.New(slog.DiscardHandler)})
	mustOK(t, err)
	t.Cleanup(func() { rs.stop() })
	adminKey, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	mustOK(t, err)
	admin := client.New(rs.url, strings.TrimSpace(string(adminKey)))
	r, _, secret, err := admin.CreateAccount(ctx, "ren", idlegrid.RoleRenter)
	mustOK(t, err)
	renter := map[string]string{"IDLEGRID_ADDR": rs.url, "IDLEGRID_KEY": secret}
	adminEnv := map[string]string{"IDLEGRID_ADDR": rs.url, "IDLEGRID_KEY": strings.TrimSpace(string(adminKey))}
	const token = "ghp_a-token-never-shown"

	if out := must(t, renter, "registry", "ls"); !strings.Contains(out, "no registry logins") {
		t.Errorf("registry ls before any login: %q", out)
	}
	// A host's name is the same in any case: the login is kept for
	// ghcr.io, as images name it, where a job's ghcr.io/acme/… finds it.
	got := runStdin(t, renter, token+"\n", "registry", "login", "https://GHCR.IO/", "-u", "acme-bot", "--password-stdin")
	if got.code != 0 || !strings.Contains(got.out, "on ghcr.io are pulled as acme-bot") {
		t.Fatalf("registry login: %s", got)
	}
	withEnv := map[string]string{"IDLEGRID_ADDR": rs.url, "IDLEGRID_KEY": secret, registryPasswordEnv: "hub-token"}
	must(t, withEnv, "registry", "login", "docker.io", "--username", "acme")

	out := must(t, renter, "registry", "ls")
	for _, want := range []string{"REGISTRY", "docker.io", "acme", "ghcr.io", "acme-bot"} {
		if !strings.Contains(out, want) {
			t.Errorf("registry ls lacks %q:\n%s", want, out)
		}
	}
	var logins []*idlegrid.RegistryLogin
	mustJSON(t, adminEnv, &logins, "registry", "ls", "--account", r.ID, "--json")
	if len(logins) != 2 || logins[1].Registry != "ghcr.io" || logins[1].Username != "acme-bot" {
		t.Errorf("registry ls --json as an admin: %+v", logins)
	}
	if all := out + must(t, renter, "registry", "ls", "--json"); strings.Contains(all, token) || strings.Contains(all, "hub-token") {
		t.Errorf("a listing shows a password:\n%s", all)
	}

	// A job on a registry the renter keeps no login for says how to add
	// one; one it keeps a login for, or Docker Hub, says nothing of it.
	for image, note := range map[string]bool{"nvcr.io/nvidia/pytorch:24.01": true, "ghcr.io/acme/trainer:1": false, "python:3.12": false} {
		out := must(t, renter, "job", "submit", "--image", image, "--gpus", "1", "--max-price", "1", "--duration", "1m")
		if got := strings.Contains(out, "note: you keep no login for nvcr.io") && strings.Contains(out, "idlegrid registry login nvcr.io"); got != note {
			t.Errorf("job submit --image %s says how to add a login: %v, want %v:\n%s", image, got, note, out)
		}
	}

	// Mistakes, each with what to do.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"registry", "login", "ghcr.io", "-u", "x"}, 2, "--password-stdin"},
		{[]string{"registry", "login", "ghcr.io", "--password-stdin"}, 2, "--username is required"},
		{[]string{"registry", "login", "acme", "-u", "x", "--password-stdin"}, 2, `REGISTRY: "acme" is not a registry host`},
		{[]string{"registry", "login", "ghcr.io/v2", "-u", "x", "--password-stdin"}, 2, `REGISTRY: "ghcr.io/v2" is not a registry host; give the host alone`},
		{[]string{"registry", "logout", "https://ghcr.io/v2/"}, 2, "(here ghcr.io, without /v2)"},
		{[]string{"registry", "logout", "quay.io"}, 1, "no login to registry quay.io"},
	} {
		got := runStdin(t, renter, "pw\n", tc.args...)
		if got.code != tc.code || !strings.Contains(got.err, tc.want) {
			t.Errorf("%v: %s; want exit %d saying %q", tc.args, got, tc.code, tc.want)
		}
	}

	if out := must(t, renter, "registry", "logout", "ghcr.io"); !strings.Contains(out, "removed your login to ghcr.io") {
		t.Errorf("registry logout: %q", out)
	}
	mustJSON(t, renter, &logins, "registry", "ls", "--json")
	if len(logins) != 1 || logins[0].Registry != "docker.io" {
		t.Errorf("after logout: %+v, want docker.io's alone", logins)
	}
	if r := run(t, renter, "registry", "logout", "docker.io", "--account", "acct_other"); r.code != 1 || !strings.Contains(r.err, "not found") {
		t.Errorf("a renter removing another account's login: %s", r)
	}
	if out := must(t, adminEnv, "registry", "logout", "docker.io", "--account", r.ID); out != "removed "+r.ID+"'s login to docker.io\n" {
		t.Errorf("an admin's registry logout --account: %q", out)
	}
	if out := must(t, renter, "registry", "ls"); !strings.Contains(out, "no registry logins") {
		t.Errorf("registry ls after the admin removed the last login: %q", out)
	}
	// Another account's, as an admin: its own words, and an account
	// that does not exist is not found, not an account without logins.
	if out := must(t, adminEnv, "registry", "ls", "--account", r.ID); out != "no registry logins: "+r.ID+"'s jobs pull their images without one\n" {
		t.Errorf("an admin's registry ls --account of an account without logins: %q", out)
	}
	for _, asJSON := range [][]string{nil, {"--json"}} {
		if x := run(t, adminEnv, append([]string{"registry", "ls", "--account", "acct_nope"}, asJSON...)...); x.code != 1 || x.out != "" || !strings.Contains(x.err, `account "acct_nope" not found`) {
			t.Errorf("registry ls --account acct_nope %v: %s", asJSON, x)
		}
	}
}

// runStdin is run with stdin as the command's standard input.
func runStdin(tb testing.TB, vars map[string]string, stdin string, args ...string) result {
	tb.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, Stdio{In: strings.NewReader(stdin), Out: &out, Err: &errOut}, func(k string) string { return vars[k] })
	return result{code: code, out: out.String(), err: errOut.String()}
}
