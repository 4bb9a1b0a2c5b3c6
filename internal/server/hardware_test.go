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
// towards level 2), with challenges as given, a flow mapping ("{…}"), and
// no random challenges: one drawn while a test waits would go unanswered
// and fail (TestServer_HardwareVerified_expiryDecays).
func hardwarePolicy(challenges string) *trustpolicy.Policy {
	return mustPolicy(`version: 2
challenges: {per_node_per_day: 0, ` + strings.TrimPrefix(challenges, "{") + `
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

// mustVerify has a node offering the test offer's GPUs of name attest
// them and pass the challenges it gets at join, as honest RTX 4090s: its
// hardware is verified where the policy counts simulated runners.
func mustVerify(t *testing.T, m *testMarket, node context.Context, nodeID, name string) {
	t.Helper()
	resp := mustAttest(t, m, node, signedAttestation(t, nodeID, fingerprinted(name)))
	if len(resp.Challenges) == 0 {
		t.Fatalf("%s got no challenge at its first attestation", name)
	}
	for _, c := range resp.Challenges {
		if got := mustAnswer(t, m, node, c, answer(t, c, "RTX4090", 24000)); got.State != idlegrid.ChallengePassed {
			t.Fatalf("%s's honest answer: %s, want passed", name, got.State)
		}
	}
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
			// An unsupported answer makes the node's first standing: no GPU
			// has passed a challenge yet, and it holds level 0.
			mustAnswer(t, m, m.node, first, idlegrid.ChallengeAnswer{Unsupported: "the GPU is busy"})
			if v := nodeStanding(t, m); v.Level != 0 || v.Detail.HardwareVerified ||
				!hasReason(v.Detail.LevelReasons, "verified hardware", "GPU "+first.GPUUUID, "has passed no challenge") {
				t.Fatalf("before any pass: level %d, verified %v, reasons %q; want level 0, unverified, as no challenge passed",
					v.Level, v.Detail.HardwareVerified, v.Detail.LevelReasons)
			}

			if got := mustAnswer(t, m, m.node, second, answer(t, second, "RTX4090", 24000)); got.State != idlegrid.ChallengePassed {
				t.Fatalf("honest answer: %s, want passed", got.State)
			}
			time.Sleep(time.Hour) // the bubble's clock: challenges come in order
			cs, err := m.srv.ChallengeNode(m.admin, m.nodeID)
			if err != nil || len(cs) != 2 {
				t.Fatalf("ChallengeNode = %d challenges, %v; want one per GPU", len(cs), err)
			}
			var again *idlegrid.Challenge // first's GPU, the first judged
			for _, c := range cs {
				mustAnswer(t, m, m.node, c, answer(t, c, "RTX4090", 24000))
				if c.GPUUUID == first.GPUUUID {
					again = c
				}
			}
			v := nodeStanding(t, m)
			if v.Level != 0 || v.Detail.HardwareVerified || slices.Contains(v.Badges, "hardware-verified") {
				t.Errorf("after passes at the simulated size: level %d, hardware verified %v, badges %v; want level 0, unverified, no badge",
					v.Level, v.Detail.HardwareVerified, v.Badges)
			}
			want := []string{"verified hardware", again.ID, "passed at the simulated size N=512", "challenges.allow_simulated_runners"}
			if !hasReason(v.Detail.LevelReasons, want...) {
				t.Errorf("level reasons %q lack %q", v.Detail.LevelReasons, want)
			}
			if passed, failed := challengeFacts(t, m, m.nodeID); passed != 3 || failed != 0 {
				t.Errorf("facts: %d passed, %d failed; want the passes counted in the score", passed, failed)
			}
			av, err := m.srv.NodeAttestation(m.provider, m.nodeID)
			if err != nil || !strings.Contains(av.VerifiedNote, "hardware not verified: challenge "+again.ID) {
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
		m := mustMarketWith(t, hardwarePolicy("{allow_simulated_runners: true, unverified_after_unsupported: 3}"), hourly)
		mustVerify(t, m, m.rival, rivalID(t, m), "barn-2") // the provider's other node
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

		round(resp.Challenges, "") // verified: both GPUs passed
		round(again(), "owner gaming")
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
			t.Errorf("provider after the pass: verified %v, badges %v; want verified, the badge (%q)", p.Detail.HardwareVerified, p.Badges, p.Detail.LevelReasons)
		}
	})
}

// h100s is barn-1's test offer with its GPUs, same UUIDs, offered as
// H100s.
func h100s() idlegrid.Offer {
	o := testOffer("barn-1")
	for i := range o.GPUs {
		o.GPUs[i].Model, o.GPUs[i].VRAMMB = "H100-80GB", 81920
	}
	return o
}

// pendingOf is the challenges barn-1 has to answer.
func pendingOf(t *testing.T, m *testMarket) []*idlegrid.Challenge {
	t.Helper()
	p, err := m.srv.PendingChallenges(m.node)
	if err != nil {
		t.Fatal(err)
	}
	return p.Challenges
}

// A challenge passed proves a GPU as the model and memory it was issued
// for. A node that passed as RTX 4090s and then offers the same GPUs as
// H100s, without attesting again, loses its verified hardware, its level
// and its badge at once, and each GPU is challenged as an H100.
func TestServer_HardwareVerified_offerChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, hardwarePolicy("{allow_simulated_runners: true}"))
		mustVerify(t, m, m.rival, rivalID(t, m), "barn-2")
		mustVerify(t, m, m.node, m.nodeID, "barn-1")
		if v := nodeStanding(t, m); v.Level != 1 || !v.Detail.HardwareVerified || !slices.Contains(v.Badges, "hardware-verified") {
			t.Fatalf("after its challenges passed: level %d, verified %v, badges %v; want level 1, verified, the badge", v.Level, v.Detail.HardwareVerified, v.Badges)
		}

		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: h100s()}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		v := nodeStanding(t, m)
		want := []string{"verified hardware", "offered as a H100-80GB with 81920 MB, has passed no challenge as such", "passed it as a RTX4090 with 24564 MB"}
		if v.Level != 0 || v.Detail.HardwareVerified || slices.Contains(v.Badges, "hardware-verified") || !hasReason(v.Detail.LevelReasons, want...) {
			t.Errorf("offered as H100s: level %d, verified %v, badges %v, reasons %q; want level 0, unverified, no badge, saying %q",
				v.Level, v.Detail.HardwareVerified, v.Badges, v.Detail.LevelReasons, want)
		}
		if n := mustNode(t, m); n.Level != 0 {
			t.Errorf("the engine sees barn-1 at level %d, want 0", n.Level)
		}
		if c := lastLevelChange(t, m); c.From != 1 || c.To != 0 || !hasReason(c.Reasons, want...) {
			t.Errorf("level change = %+v, want the demotion from 1 to 0 saying %q", c, want)
		}
		if p := providerStanding(t, m); p.Detail.HardwareVerified || slices.Contains(p.Badges, "hardware-verified") {
			t.Errorf("provider: verified %v, badges %v; want unverified with its node", p.Detail.HardwareVerified, p.Badges)
		}
		av, err := m.srv.NodeAttestation(m.provider, m.nodeID)
		if err != nil || !strings.HasPrefix(av.VerifiedNote, "hardware not verified: GPU") {
			t.Errorf("attestation note = %q (%v), want the GPU not verified", av.VerifiedNote, err)
		}
		cs := pendingOf(t, m)
		if len(cs) != 2 {
			t.Fatalf("%d challenges after the offer changed, want one per GPU", len(cs))
		}
		for _, c := range cs {
			if c.Reason != idlegrid.ChallengeOnChange || c.Model != "H100-80GB" || c.VRAMMB != 81920 {
				t.Fatalf("challenge = %+v, want one for the change, of an H100-80GB with 81920 MB", c)
			}
		}
		// Offering the same again changes nothing.
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: h100s()}); err != nil {
			t.Fatal(err)
		}
		if got := pendingOf(t, m); len(got) != 2 {
			t.Fatalf("%d challenges after the same offer again, want still 2", len(got))
		}
		// An RTX 4090 has an RTX 4090's memory: far short of an H100's.
		if got := mustAnswer(t, m, m.node, cs[0], answer(t, cs[0], "RTX4090", 24000)); got.State != idlegrid.ChallengeFailed {
			t.Errorf("an RTX 4090's answer to an H100's challenge: %s, want failed", got.State)
		}
	})
}

// A challenge issued for a GPU's old claim still waits after its offer
// changes, but passing it proves the old claim, not the new: the GPU gets
// a challenge for its new claim, and stays unverified until that passes.
func TestServer_HardwareVerified_oldClaimsChallenge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, hardwarePolicy("{allow_simulated_runners: true}"))
		mustVerify(t, m, m.rival, rivalID(t, m), "barn-2")
		old := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1"))).Challenges
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: h100s()}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := pendingOf(t, m); len(got) != 4 {
			t.Fatalf("%d challenges waiting, want the 2 for RTX 4090s and 2 for H100s", len(got))
		}
		for _, c := range old {
			if got := mustAnswer(t, m, m.node, c, answer(t, c, "RTX4090", 24000)); got.State != idlegrid.ChallengePassed {
				t.Fatalf("the old claim's challenge: %s, want passed", got.State)
			}
		}
		v := nodeStanding(t, m)
		if v.Level != 0 || v.Detail.HardwareVerified || slices.Contains(v.Badges, "hardware-verified") ||
			!hasReason(v.Detail.LevelReasons, "offered as a H100-80GB", "waits for the agent's answer") {
			t.Errorf("after passing the RTX 4090s' challenges while offering H100s: level %d, verified %v, badges %v, reasons %q; "+
				"want level 0, unverified, no badge, the H100 challenge waiting", v.Level, v.Detail.HardwareVerified, v.Badges, v.Detail.LevelReasons)
		}
	})
}

// A node that never attests is never challenged, and so never verified:
// it holds level 0 however good its score.
func TestServer_HardwareVerified_neverAttested(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, hardwarePolicy("{allow_simulated_runners: true}"))
		m.advance(t, 6*time.Minute) // the uptime pass saves its first standing
		v := nodeStanding(t, m)
		if v.Score < 0.85 || v.Level != 0 || v.Detail.HardwareVerified || slices.Contains(v.Badges, "hardware-verified") ||
			!hasReason(v.Detail.LevelReasons, "verified hardware", "has passed no challenge") {
			t.Errorf("never attested: score %.3f, level %d, verified %v, badges %v, reasons %q; want level 0, unverified, no badge",
				v.Score, v.Level, v.Detail.HardwareVerified, v.Badges, v.Detail.LevelReasons)
		}
		if n := mustNode(t, m); n.Level != 0 {
			t.Errorf("the engine sees barn-1 at level %d, want 0", n.Level)
		}
	})
}

// An expired challenge leaves the hardware unverified while its decayed
// count is half or more; once it decays below, the hardware is verified
// again, and the badge and the attestation note say so as the levels do.
func TestServer_HardwareVerified_expiryDecays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No random challenges: one issued while the test waits would go
		// unanswered and fail too (1 a day by default: about 1 run in 100).
		m := mustMarketWith(t, mustPolicy(`version: 2
challenges: {allow_simulated_runners: true, per_node_per_day: 0}
reputation: {half_life: 2h}
gold: {min_level: 0}
levels:
  rules:
    - {level: 1, name: established, min_score: 0.5, min_gpu_hours: 0, verified_hardware: true}
`), hourly)
		mustVerify(t, m, m.rival, rivalID(t, m), "barn-2")
		mustVerify(t, m, m.node, m.nodeID, "barn-1")
		cs, err := m.srv.ChallengeNode(m.admin, m.nodeID)
		if err != nil || len(cs) != 2 {
			t.Fatalf("ChallengeNode = %d, %v", len(cs), err)
		}
		mustAnswer(t, m, m.node, cs[0], answer(t, cs[0], "RTX4090", 24000))
		m.advance(t, 11*time.Minute) // cs[1] expires unanswered
		if c, err := m.store.FindChallenge(context.Background(), cs[1].ID); err != nil || c.State != idlegrid.ChallengeExpired {
			t.Fatalf("unanswered challenge = %+v, %v; want expired", c, err)
		}
		v := nodeStanding(t, m)
		if v.Level != 0 || v.Detail.HardwareVerified || slices.Contains(v.Badges, "hardware-verified") ||
			!hasReason(v.Detail.LevelReasons, "failed or went unanswered recently") {
			t.Errorf("after an expiry: level %d, verified %v, badges %v, reasons %q; want level 0, unverified, no badge",
				v.Level, v.Detail.HardwareVerified, v.Badges, v.Detail.LevelReasons)
		}
		if av, err := m.srv.NodeAttestation(m.provider, m.nodeID); err != nil || !strings.HasPrefix(av.VerifiedNote, "hardware not verified: a hardware challenge failed") {
			t.Errorf("attestation note after an expiry = %q (%v), want not verified, as the levels say", av.VerifiedNote, err)
		}

		time.Sleep(3 * time.Hour) // one failed challenge, decayed by 1.5 half-lives: 0.35
		synctest.Wait()           // the reaper's pass at this instant, if any, done
		v = nodeStanding(t, m)
		if !v.Detail.HardwareVerified || !slices.Contains(v.Badges, "hardware-verified") {
			t.Errorf("once the expiry decayed: verified %v, badges %v; want verified and the badge back", v.Detail.HardwareVerified, v.Badges)
		}
		if av, err := m.srv.NodeAttestation(m.provider, m.nodeID); err != nil || !strings.HasPrefix(av.VerifiedNote, "hardware verified") {
			t.Errorf("attestation note once the expiry decayed = %q (%v), want verified", av.VerifiedNote, err)
		}
	})
}
