package cli

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

func TestKeyCommand_routing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rs, err := startServer(ctx, serveConfig{listen: "127.0.0.1:0", dsn: filepath.Join(dir, "idlegrid.db"),
		adminKeyFile: filepath.Join(dir, "admin.key"), logger: slog.New(slog.DiscardHandler)})
	mustOK(t, err)
	t.Cleanup(func() { rs.stop() })
	url := rs.url
	adminKey, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	mustOK(t, err)
	admin := client.New(url, strings.TrimSpace(string(adminKey)))
	_, key, secret, err := admin.CreateAccount(ctx, "ren", idlegrid.RoleRenter)
	mustOK(t, err)
	_, _, otherSecret, err := admin.CreateAccount(ctx, "other", idlegrid.RoleRenter)
	mustOK(t, err)
	renter := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": secret}
	other := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": otherSecret}

	t.Run("none yet", func(t *testing.T) {
		got := must(t, renter, "key", "routing", key.ID)
		if want := "API key " + key.ID + " has no default routing: its requests use the gateway's default\n"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		// --json has no updated_at while there is none, not the zero time.
		if got := must(t, renter, "key", "routing", key.ID, "--json"); strings.Contains(got, "updated_at") || strings.Contains(got, "0001-01-01") {
			t.Errorf("key routing --json with none set:\n%s\nwant no updated_at", got)
		}
	})
	t.Run("set, merging flag by flag", func(t *testing.T) {
		must(t, renter, "key", "routing", key.ID, "--residency", "EU", "--sort", "price", "--ignore", "node_x,node_y")
		var got idlegrid.KeyRouting
		mustJSON(t, renter, &got, "key", "routing", key.ID, "--max-completion-price", "2.50", "--fallbacks", "false")
		no, price := false, idlegrid.Micros(2_500_000)
		want := idlegrid.Routing{Sort: "price", DataResidency: []string{"EU"}, Ignore: []string{"node_x", "node_y"},
			AllowFallbacks: &no, MaxPrice: &idlegrid.RoutingMaxPrice{Completion: &price}}
		if diff := cmp.Diff(want, got.Routing); diff != "" {
			t.Errorf("routing (-want +got):\n%s", diff)
		}
		if !strings.Contains(must(t, renter, "key", "routing", key.ID, "--json"), `"updated_at": "`+got.UpdatedAt.Format("2006")) {
			t.Errorf("key routing --json once set lacks its updated_at")
		}
		out := must(t, renter, "key", "routing", key.ID)
		for _, line := range []string{"sort                   price", "data residency         EU",
			"ignore                 node_x, node_y", "max completion price   $2.500000 per M tokens", "fallbacks              false"} {
			if !strings.Contains(out, line) {
				t.Errorf("output lacks %q:\n%s", line, out)
			}
		}
	})
	t.Run("none empties a list", func(t *testing.T) {
		var got idlegrid.KeyRouting
		mustJSON(t, renter, &got, "key", "routing", key.ID, "--ignore", "none")
		if got.Routing.Ignore != nil || len(got.Routing.DataResidency) != 1 {
			t.Errorf("routing after --ignore none: %+v", got.Routing)
		}
	})
	t.Run("mistakes", func(t *testing.T) {
		for _, tt := range []struct {
			args     []string
			code     int
			contains string
		}{
			{[]string{"--sort", "cheapest"}, 2, "--sort: want price, latency, throughput or none"},
			{[]string{"--region", "eu-west,eu-west"}, 1, "routing.region[1]"},
			{[]string{"--fallbacks", "maybe"}, 2, "--fallbacks: want true or false"},
			{[]string{"--max-prompt-price", "1.2345678"}, 2, "--max-prompt-price"},
		} {
			r := run(t, renter, append([]string{"key", "routing", key.ID}, tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.err, tt.contains) {
				t.Errorf("key routing %v: %s\nwant exit %d and %q", tt.args, r, tt.code, tt.contains)
			}
		}
	})
	t.Run("another account's key", func(t *testing.T) {
		if r := run(t, other, "key", "routing", key.ID); r.code != 1 || !strings.Contains(r.err, "not found") {
			t.Errorf("reading another's key: %s", r)
		}
		if r := run(t, other, "key", "routing", key.ID, "--sort", "price"); r.code != 1 || !strings.Contains(r.err, "not found") {
			t.Errorf("setting another's key: %s", r)
		}
	})
	t.Run("clear", func(t *testing.T) {
		got := must(t, renter, "key", "routing", key.ID, "--clear")
		if !strings.Contains(got, "has no default routing") {
			t.Errorf("after --clear: %q", got)
		}
	})
}
