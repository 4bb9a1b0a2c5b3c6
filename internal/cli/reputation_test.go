package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// reputationMarket runs the real server under policy with a provider whose
// node has joined, and returns the server's URL, the provider's and a
// renter's keys, and the node's ID.
func reputationMarket(t *testing.T, policy *trustpolicy.Policy) (url, providerKey, renterKey, nodeID string) {
	t.Helper()
	ctx := context.Background()
	rs, err := startServer(ctx, serveConfig{
		listen: "127.0.0.1:0", dsn: filepath.Join(t.TempDir(), "idlegrid.db"),
		adminKeyFile: filepath.Join(t.TempDir(), "admin.key"), logger: slog.New(slog.DiscardHandler), trustPolicy: policy,
	})
	mustOK(t, err)
	t.Cleanup(func() { rs.stop() })
	admin := client.New(rs.url, rs.adminKey)
	_, _, providerKey, err = admin.CreateAccount(ctx, "prov", idlegrid.RoleProvider)
	mustOK(t, err)
	_, _, renterKey, err = admin.CreateAccount(ctx, "ren", idlegrid.RoleRenter)
	mustOK(t, err)
	_, token, err := client.New(rs.url, providerKey).CreateJoinToken(ctx, "n", 1, time.Hour)
	mustOK(t, err)
	_, key, err := ed25519.GenerateKey(nil)
	mustOK(t, err)
	resp, err := client.NewAgent(rs.url, key).Join(ctx, idlegrid.JoinRequest{Token: token, Offer: idlegrid.Offer{
		Name: "rig", GPUs: []idlegrid.GPU{{UUID: "GPU-1", Model: "RTX4090", VRAMMB: 24576}}, Region: "eu-west", Residency: "EU",
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask:      idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 400_000}},
	}})
	mustOK(t, err)
	return rs.url, providerKey, renterKey, resp.NodeID
}

func TestNodeReputation(t *testing.T) {
	url, providerKey, renterKey, nodeID := reputationMarket(t, nil)
	owner := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": providerKey}

	t.Run("Owner", func(t *testing.T) {
		r := run(t, owner, "node", "reputation", nodeID)
		if r.code != 0 {
			t.Fatalf("got %s, want exit 0", r)
		}
		for _, want := range []string{"Score", "0.900", "0 (newcomer)", fmt.Sprintf("version %d", trustpolicy.Version), "Formula", "score 0.900 = (good 0.0 + prior 9)",
			"leases", "level 1 (established) needs 10 GPU-hours served, has 0", "What would raise the score:"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("output lacks %q:\n%s", want, r.out)
			}
		}
	})
	t.Run("Renter", func(t *testing.T) {
		r := run(t, map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": renterKey}, "node", "reputation", nodeID)
		if r.code != 0 || !strings.Contains(r.out, "0.900") || strings.Contains(r.out, "Formula") {
			t.Errorf("got %s, want the score without the evidence", r)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		r := run(t, owner, "node", "reputation", nodeID, "--json")
		var v idlegrid.ReputationView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil || r.code != 0 {
			t.Fatalf("got %s (%v), want JSON", r, err)
		}
		if v.SubjectID != nodeID || v.Detail == nil || len(v.Detail.Dimensions) != 5 || v.PolicyVersion != trustpolicy.Version {
			t.Errorf("--json = %+v, want the node's view with its five dimensions", v)
		}
	})
	t.Run("UnknownNode", func(t *testing.T) {
		if r := run(t, owner, "node", "reputation", "node_nope"); r.code != 1 || !strings.Contains(r.err, "not found") {
			t.Errorf("got %s, want a not-found error", r)
		}
	})
	t.Run("NoID", func(t *testing.T) {
		if r := run(t, owner, "node", "reputation"); r.code != 2 {
			t.Errorf("got %s, want a usage error", r)
		}
	})
}

func TestServer_trustPolicy(t *testing.T) {
	t.Run("Loaded", func(t *testing.T) {
		p, err := trustpolicy.Parse([]byte("version: 1\ngold: {min_level: 3}\n"))
		mustOK(t, err)
		url, _, renterKey, _ := reputationMarket(t, p)
		got, err := client.New(url, renterKey).TrustPolicy(context.Background())
		mustOK(t, err)
		if got.GoldMinLevel != 3 || got.SHA256 != p.SHA256 {
			t.Errorf("policy in force = %+v, want gold at level 3 and sha256 %s", got, p.SHA256)
		}
	})
	t.Run("BadFile", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "trust.yaml")
		mustOK(t, os.WriteFile(path, []byte("version: 1\ngold: {min_levl: 2}\n"), 0o600))
		r := run(t, nil, "server", "--db", filepath.Join(t.TempDir(), "db"), "--trust-policy", path)
		if r.code == 0 || !strings.Contains(r.err, "gold.min_levl") || !strings.Contains(r.err, "--trust-policy") {
			t.Errorf("got %s, want an error naming the key and what to do", r)
		}
	})
}
