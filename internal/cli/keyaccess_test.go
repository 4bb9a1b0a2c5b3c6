package cli

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

func TestKeyCommand_access(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rs, err := startServer(ctx, serveConfig{listen: "127.0.0.1:0", dsn: filepath.Join(dir, "idlegrid.db"),
		adminKeyFile: filepath.Join(dir, "admin.key"), logger: slog.New(slog.DiscardHandler)})
	mustOK(t, err)
	t.Cleanup(func() { rs.stop() })
	adminKey, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	mustOK(t, err)
	_, _, secret, err := client.New(rs.url, strings.TrimSpace(string(adminKey))).CreateAccount(ctx, "ren", idlegrid.RoleRenter)
	mustOK(t, err)
	renter := map[string]string{"IDLEGRID_ADDR": rs.url, "IDLEGRID_KEY": secret}

	var use createdKey
	mustJSON(t, renter, &use, "key", "create", "--name", "team", "--access", "use")
	if use.Key.Access != idlegrid.AccessUse {
		t.Fatalf("key create --access use made a key with access %q", use.Key.Access)
	}
	if out := must(t, renter, "key", "create", "--name", "grafana", "--access", "READ"); !strings.Contains(out, "(grafana), access read\n") {
		t.Errorf("key create --access read printed:\n%s", out)
	}
	if ls := must(t, renter, "key", "ls"); !strings.Contains(ls, "team     use") || !strings.Contains(ls, "default  all") {
		t.Errorf("key ls printed:\n%s", ls)
	}
	var keys []*idlegrid.APIKey
	mustJSON(t, renter, &keys, "key", "ls")
	if len(keys) != 3 || keys[0].Access != idlegrid.AccessAll {
		t.Errorf("key ls --json: %+v, want 3 keys, the first with access all", keys)
	}

	team := map[string]string{"IDLEGRID_ADDR": rs.url, "IDLEGRID_KEY": use.Secret}
	if r := run(t, team, "key", "create", "--name", "escape"); r.code != 1 || !strings.Contains(r.err, "idlegrid key create --access all") || !strings.Contains(r.err, "a key of wider access") {
		t.Errorf("a use key making a key: %s", r)
	}
	if r := run(t, renter, "key", "create", "--name", "x", "--access", "root"); r.code != 2 || !strings.Contains(r.err, "--access: want all, use or read") {
		t.Errorf("key create --access root: %s", r)
	}
}
