package cli

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestNodeQuarantine runs a server and an agent with simulated GPUs that
// claim to be RTX 4090s, and an admin who quarantines the node, reads its
// hardware record and lifts the quarantine.
func TestNodeQuarantine(t *testing.T) {
	// The GPUs are simulated: let their passes verify hardware.
	policy := filepath.Join(t.TempDir(), "trust.yaml")
	if err := os.WriteFile(policy, []byte("version: 2\nchallenges: {allow_simulated_runners: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, adminKey := mustServer(t, "--trust-policy", policy)
	admin := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": adminKey}
	out := must(t, admin, "account", "create", "--name", "barn", "--role", "provider")
	m := regexp.MustCompile(`API key \(shown once\): (igk_\w+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("account create printed:\n%s", out)
	}
	provider := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": m[1]}
	tok := regexp.MustCompile(`secret \(shown once\): (\S+)`).FindStringSubmatch(must(t, provider, "token", "create", "--name", "rig"))
	if tok == nil {
		t.Fatal("token create printed no secret")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	yaml := "server: " + url + "\njoin_token: " + tok[1] + "\ndata_dir: " + filepath.Join(dir, "data") +
		"\nname: rig-1\nregion: eu-west\nresidency: EU\nask:\n  floor:\n    silver: \"1.50\"\nfake_gpus: 2xRTX4090\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	startMain(t, "agent", "--config", cfg)

	var view idlegrid.NodeAttestationView
	var nodeID string
	eventually(t, "the node's challenges to pass", func() error {
		var nodes []*idlegrid.Node
		mustJSON(t, provider, &nodes, "node", "ls")
		if len(nodes) != 1 {
			return errors.New("no node yet")
		}
		nodeID = nodes[0].ID
		mustJSON(t, provider, &view, "node", "hardware", nodeID)
		if !strings.HasPrefix(view.VerifiedNote, "hardware verified") {
			return errors.New(view.VerifiedNote)
		}
		return nil
	})
	if got := must(t, provider, "node", "hardware", nodeID); !strings.Contains(got, "fake-vbios-1") || !strings.Contains(got, "passed") {
		t.Errorf("node hardware printed:\n%s\nwant the fingerprint and the passed challenges", got)
	}

	// Its challenges a page at a time: a full page ends with the next.
	var all, paged []*idlegrid.Challenge
	mustJSON(t, provider, &all, "node", "challenges", nodeID)
	next := regexp.MustCompile(`more may follow: idlegrid node challenges \S+ --limit 1 --before (chl_\w+)`).FindStringSubmatch(
		must(t, provider, "node", "challenges", nodeID, "--limit", "1"))
	if len(all) != 2 || next == nil || next[1] != all[0].ID {
		t.Fatalf("node challenges: %d challenges, next page %q; want two, a page of one ending with the first", len(all), next)
	}
	mustJSON(t, provider, &paged, "node", "challenges", nodeID, "--limit", "1", "--before", next[1])
	if len(paged) != 1 || paged[0].ID != all[1].ID {
		t.Errorf("the page after %s = %+v, want %s", next[1], paged, all[1].ID)
	}
	if r := run(t, provider, "node", "quarantine", "ls", "--before", "qua_missing"); r.code != 2 || !strings.Contains(r.err, "--before: \"qua_missing\"") {
		t.Errorf("quarantine ls after no quarantine: %s, want refused naming --before", r)
	}

	r := run(t, provider, "node", "quarantine", "add", nodeID, "--reason", "mine")
	if r.code != 1 || !strings.Contains(r.err, "admin") {
		t.Errorf("a provider quarantining: %s, want refused", r)
	}
	if got := must(t, admin, "node", "quarantine", "add", nodeID, "--reason", "receipts disagree"); !strings.Contains(got, "quarantine lift "+nodeID) {
		t.Errorf("quarantine add printed:\n%s", got)
	}
	if got := must(t, provider, "node", "get", nodeID); !strings.Contains(got, "Quarantined") {
		t.Errorf("node get printed:\n%s\nwant it shown quarantined", got)
	}
	var qs []*idlegrid.Quarantine
	mustJSON(t, provider, &qs, "node", "quarantine", "ls")
	if len(qs) != 1 || qs[0].NodeID != nodeID || qs[0].Reason != "receipts disagree" {
		t.Fatalf("quarantine ls = %+v, want the node's", qs)
	}
	if got := must(t, admin, "node", "quarantine", "lift", nodeID, "--note", "checked"); !strings.Contains(got, "quarantine lifted") {
		t.Errorf("quarantine lift printed:\n%s", got)
	}
	mustJSON(t, admin, &qs, "node", "quarantine", "ls")
	if len(qs) != 0 {
		t.Errorf("quarantines in force after the lift: %+v", qs)
	}
	mustJSON(t, admin, &qs, "node", "quarantine", "ls", "--all")
	if len(qs) != 1 || qs[0].LiftNote != "checked" {
		t.Errorf("all quarantines = %+v, want the lifted one with its note", qs)
	}
	if r := run(t, admin, "node", "quarantine", "lift", nodeID); r.code != 1 || !strings.Contains(r.err, "not quarantined") {
		t.Errorf("lifting twice: %s", r)
	}
}

func TestOwedNote(t *testing.T) {
	since := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	if got := owedNote(&idlegrid.OwedChallenge{Since: since}); !strings.Contains(got, "2026-12-06") || strings.Contains(got, "no new leases") {
		t.Errorf("owed, still in the market: %q", got)
	}
	if got := owedNote(&idlegrid.OwedChallenge{Since: since, NoNewLeases: true}); !strings.Contains(got, "takes no new leases until then") || !strings.Contains(got, "challenges.max_owed") {
		t.Errorf("owed too long: %q", got)
	}
	if got := owedNote(&idlegrid.OwedChallenge{Since: since, NoNewLeases: true, ChallengeID: "chl_1"}); !strings.Contains(got, "issued as chl_1") || !strings.Contains(got, "until it is answered or expires") {
		t.Errorf("issued, running: %q", got)
	}
}
