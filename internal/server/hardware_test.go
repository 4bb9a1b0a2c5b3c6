package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// hardwarePolicy is levelsByScore's ladder, where a newcomer holds level 1
// if its hardware is verified (and passed challenges raise its score
// towards level 2), with challenges as given.
func hardwarePolicy(challenges string) *trustpolicy.Policy {
	return mustPolicy(`version: 2
challenges: ` + challenges + `
levels:
  rules:
    - {level: 1, name: established, min_score: 0.85, min_gpu_hours: 0, verified_hardware: true}
    - {level: 2, name: trusted,     min_score: 0.92, min_gpu_hours: 0, verified_hardware: true}
    - {level: 3, name: elite,       min_score: 0.97, min_gpu_hours: 0, verified_hardware: true}
`)
}

// providerStanding is barn-1's provider's reputation as it sees it.
func providerStanding(t *testing.T, m *testMarket) *idlegrid.ReputationView {
	t.Helper()
	v, err := m.srv.ProviderReputation(m.provider, idlegrid.CallerFromContext(m.provider).AccountID)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// nodeStanding is barn-1's reputation as its provider sees it.
func nodeStanding(t *testing.T, m *testMarket) *idlegrid.ReputationView {
	t.Helper()
	v, err := m.srv.NodeReputation(m.provider, m.nodeID)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// lastLevelChange is barn-1's newest level change by its audit log, checked
// against the level history.
func lastLevelChange(t *testing.T, m *testMarket) *idlegrid.LevelChange {
	t.Helper()
	ctx := context.Background()
	es, err := m.store.ListAuditEntries(ctx, idlegrid.AuditFilter{Subject: m.nodeID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var logged idlegrid.LevelChange
	for _, e := range es {
		if e.Kind == string(audit.KindLevelChange) {
			if err := json.Unmarshal(e.Payload, &logged); err != nil {
				t.Fatal(err)
			}
		}
	}
	history, err := m.store.ListLevelChanges(ctx, idlegrid.SubjectNode, m.nodeID, 100)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(history, func(c *idlegrid.LevelChange) bool { return c.ID == logged.ID })
	if i < 0 || !slices.Equal(history[i].Reasons, logged.Reasons) || history[i].To != logged.To {
		t.Fatalf("audit log's last level change %+v is not in the level history %v", logged, history)
	}
	return history[i]
}

func hasReason(reasons []string, want ...string) bool {
	return slices.ContainsFunc(reasons, func(r string) bool {
		for _, w := range want {
			if !strings.Contains(r, w) {
				return false
			}
		}
		return true
	})
}

// A node's runner is its own word: one that says it computes challenges
// on the CPU gets them at the simulated size, and a pass at that size
// counts as verified hardware only where the policy allows simulated
// runners. The default policy does not.
func TestServer_HardwareVerified_simulatedSize(t *testing.T) {
	if trustpolicy.Default().Challenges.AllowSimulatedRunners {
		t.Fatal("the default policy lets simulated runners verify hardware")
	}
	t.Run("NotAllowed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, hardwarePolicy("{allow_simulated_runners: false}"))
			resp := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1")))
			first, second := resp.Challenges[0], resp.Challenges[1]
			// An unsupported answer makes the node's first standing: nothing
			// doubts its hardware yet, and it holds level 1.
			mustAnswer(t, m, m.node, first, idlegrid.ChallengeAnswer{Unsupported: "the GPU is busy"})
			if v := nodeStanding(t, m); v.Level != 1 {
				t.Fatalf("before any pass: level %d, want 1", v.Level)
			}

			if got := mustAnswer(t, m, m.node, second, answer(t, second, "RTX4090", 24000)); got.State != idlegrid.ChallengePassed {
				t.Fatalf("honest answer: %s, want passed", got.State)
			}
			v := nodeStanding(t, m)
			if v.Level != 0 || v.Detail.HardwareVerified || slices.Contains(v.Badges, "hardware-verified") {
				t.Errorf("after a pass at the simulated size: level %d, hardware verified %v, badges %v; want level 0, unverified, no badge",
					v.Level, v.Detail.HardwareVerified, v.Badges)
			}
			want := []string{"verified hardware", second.ID, "passed at the simulated size N=512", "challenges.allow_simulated_runners"}
			if !hasReason(v.Detail.LevelReasons, want...) {
				t.Errorf("level reasons %q lack %q", v.Detail.LevelReasons, want)
			}
			if c := lastLevelChange(t, m); c.From != 1 || c.To != 0 || !hasReason(c.Reasons, want...) {
				t.Errorf("level change = %+v, want from 1 to 0 saying %q", c, want)
			}
			if passed, failed := challengeFacts(t, m, m.nodeID); passed != 1 || failed != 0 {
				t.Errorf("facts: %d passed, %d failed; want the pass counted in the score", passed, failed)
			}
			av, err := m.srv.NodeAttestation(m.provider, m.nodeID)
			if err != nil || !strings.Contains(av.VerifiedNote, "hardware not verified: challenge "+second.ID) {
				t.Errorf("attestation note = %q (%v), want it to say the pass does not verify the hardware", av.VerifiedNote, err)
			}
		})
	})
	t.Run("Allowed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, hardwarePolicy("{allow_simulated_runners: true}"))
			resp := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1")))
			for _, c := range resp.Challenges {
				mustAnswer(t, m, m.node, c, answer(t, c, "RTX4090", 24000))
			}
			v := nodeStanding(t, m)
			if v.Level != 1 || !v.Detail.HardwareVerified || !slices.Contains(v.Badges, "hardware-verified") {
				t.Errorf("level %d, hardware verified %v, badges %v; want level 1, verified, the badge", v.Level, v.Detail.HardwareVerified, v.Badges)
			}
		})
	})
}

// A GPU whose challenges are answered unsupported again and again yields
// no fact either way; after the policy's number in a row the node's
// hardware counts as unverified, a demotion recorded with its reason, until
// a challenge of that GPU passes again.
func TestServer_HardwareVerified_unsupportedInARow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, hardwarePolicy("{allow_simulated_runners: true, unverified_after_unsupported: 3}"))
		resp := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1")))
		busy := resp.Challenges[1].GPUUUID
		// round answers each challenge: busy's unsupported (why), the
		// other's passed, or both passed when why is "".
		round := func(cs []*idlegrid.Challenge, why string) {
			t.Helper()
			for _, c := range cs {
				ans := answer(t, c, "RTX4090", 24000)
				if c.GPUUUID == busy && why != "" {
					ans = idlegrid.ChallengeAnswer{Unsupported: why}
				}
				mustAnswer(t, m, m.node, c, ans)
			}
		}
		again := func() []*idlegrid.Challenge {
			t.Helper()
			time.Sleep(time.Hour) // the bubble's clock: challenges come in order
			cs, err := m.srv.ChallengeNode(m.admin, m.nodeID)
			if err != nil || len(cs) != 2 {
				t.Fatalf("ChallengeNode = %d challenges, %v; want one per GPU", len(cs), err)
			}
			return cs
		}

		round(resp.Challenges, "owner gaming")
		round(again(), "owner gaming")
		held := nodeStanding(t, m)
		if held.Level < 1 || !held.Detail.HardwareVerified {
			t.Fatalf("after 2 unsupported in a row: level %d, verified %v; want level 1 or more, verified", held.Level, held.Detail.HardwareVerified)
		}
		round(again(), "GPU-x is in use by 1 other processes")
		want := []string{"hardware could not be checked: 3 challenges in a row answered unsupported on GPU " + busy,
			"GPU-x is in use by 1 other processes"}
		v := nodeStanding(t, m)
		if v.Level != 0 || v.Detail.HardwareVerified || !hasReason(v.Detail.LevelReasons, want...) {
			t.Fatalf("after 3 unsupported in a row: level %d, verified %v, reasons %q; want level 0, unverified, saying %q",
				v.Level, v.Detail.HardwareVerified, v.Detail.LevelReasons, want)
		}
		if c := lastLevelChange(t, m); c.From < 1 || c.To != 0 || !hasReason(c.Reasons, want...) {
			t.Fatalf("level change = %+v, want a demotion to 0 saying %q", c, want)
		}
		if av, err := m.srv.NodeAttestation(m.provider, m.nodeID); err != nil || !strings.Contains(av.VerifiedNote, "hardware could not be checked") {
			t.Errorf("attestation note = %q (%v), want it to say the hardware could not be checked", av.VerifiedNote, err)
		}
		// The provider's standing follows its node's hardware, and its saved
		// level is demoted in the same save as the node's.
		if p := providerStanding(t, m); p.Level != 0 {
			t.Errorf("provider level = %d after its node's demotion, want 0", p.Level)
		}
		if p := providerStanding(t, m); p.Detail.HardwareVerified || slices.Contains(p.Badges, "hardware-verified") ||
			!hasReason(p.Detail.LevelReasons, append([]string{"node " + m.nodeID}, want...)...) {
			t.Errorf("provider: verified %v, badges %v, reasons %q; want unverified, no badge, naming node %s and saying %q",
				p.Detail.HardwareVerified, p.Badges, p.Detail.LevelReasons, m.nodeID, want)
		}

		round(again(), "") // the busy GPU passes again
		back := nodeStanding(t, m)
		if back.Level < 1 || !back.Detail.HardwareVerified {
			t.Fatalf("after a pass: level %d, verified %v; want level 1 or more again", back.Level, back.Detail.HardwareVerified)
		}
		if c := lastLevelChange(t, m); c.From != 0 || c.To != back.Level {
			t.Errorf("level change = %+v, want the promotion back to %d", c, back.Level)
		}
		if p := providerStanding(t, m); !p.Detail.HardwareVerified || !slices.Contains(p.Badges, "hardware-verified") {
			t.Errorf("provider after the pass: verified %v, badges %v; want verified, the badge", p.Detail.HardwareVerified, p.Badges)
		}
	})
}
