package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// These tests are a new node standing on its provider (docs/trust.md, "A
// new node stands on its provider"): a provider the market caught cannot
// shed its record by joining a new node, and an honest provider's new node
// starts at the newcomer prior as before.

// mustJoinUnder joins a node to provider providerID and has it offer its
// GPUs, returning its ID and caller.
func mustJoinUnder(t *testing.T, m *testMarket, providerID, name string) (string, context.Context) {
	t.Helper()
	owner := idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{AccountID: providerID, Role: idlegrid.RoleProvider})
	_, secret, err := m.srv.CreateJoinToken(owner, "rack", 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.srv.Join(context.Background(), idlegrid.JoinRequest{Token: secret, PublicKey: nodekey.PublicString(pub), Offer: testOffer(name)})
	if err != nil {
		t.Fatal(err)
	}
	nodeKeys.Store(resp.NodeID, priv)
	node := idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{NodeID: resp.NodeID, AccountID: providerID, Role: idlegrid.RoleProvider})
	if err := m.srv.UpdateOffer(node, idlegrid.OfferRequest{Offer: testOffer(name)}); err != nil {
		t.Fatal(err)
	}
	return resp.NodeID, node
}

func mustCancel(t *testing.T, m *testMarket, jobID string) {
	t.Helper()
	if _, err := m.srv.CancelJob(m.renter, jobID); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
}

// reliabilityOf is what the engine ranks node id by.
func reliabilityOf(t *testing.T, m *testMarket, id string) float64 {
	t.Helper()
	n, err := m.store.FindNode(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return n.Reliability
}

func nodeView(t *testing.T, m *testMarket, as context.Context, id string) *idlegrid.ReputationView {
	t.Helper()
	v, err := m.srv.NodeReputation(as, id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func adviceText(v *idlegrid.ReputationView) string {
	var out []string
	for _, a := range v.Detail.Advice {
		out = append(out, a.Text)
	}
	return strings.Join(out, "\n")
}

// A provider convicted of a mismatched result by spot-check verification
// joins a new node: it ranks at most at its provider's score, below a
// clean newcomer, and shows flagged by its provider's dispute.
func TestServer_NodeReputation_newNodeOfConvictedProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, verifyAll)
		mustBond(t, m, 100)
		_, second := mustProviderNode(t, m, "second")
		_, third := mustProviderNode(t, m, "third")
		nodes := []context.Context{m.node, m.rival, second, third}
		verifiable := testSpec()
		verifiable.Verifiable = true
		j, err := m.srv.SubmitJob(m.renter, verifiable)
		if err != nil {
			t.Fatal(err)
		}
		mustRunDigest(t, m, nodes, j.ID, "sha256:right")
		liar := mustRunDigest(t, m, nodes, mustVerification(t, m).Rerun.JobID, "sha256:wrong")
		mustRunDigest(t, m, nodes, mustVerification(t, m).Tiebreak.JobID, "sha256:right")
		v := mustVerification(t, m)
		if v.State != idlegrid.VerificationConvicted || v.DisputeID == "" {
			t.Fatalf("verification %+v, want the liar convicted", v)
		}
		provider, err := m.srv.ProviderReputation(m.admin, liar.ProviderID)
		if err != nil {
			t.Fatal(err)
		} else if provider.Score >= 0.9 {
			t.Fatalf("the convicted provider's score %.4f, want it below the newcomer prior", provider.Score)
		}

		sybil, sybilNode := mustJoinUnder(t, m, liar.ProviderID, "sybil")
		cleanID, cleanNode := mustProviderNode(t, m, "clean")
		clean := idlegrid.CallerFromContext(cleanNode).NodeID
		check := func(when string) {
			t.Helper()
			if got := reliabilityOf(t, m, sybil); !near(got, provider.Score) {
				t.Errorf("%s: the engine ranks the convicted provider's new node by %.4f, want its provider's %.4f", when, got, provider.Score)
			}
			if got := reliabilityOf(t, m, clean); !near(got, 0.9) {
				t.Errorf("%s: the engine ranks provider %s's new node by %.4f, want the newcomer prior 0.9000", when, cleanID, got)
			}
			// A renter sees what the engine ranks by, and the flag.
			if rv := nodeView(t, m, m.renter, sybil); !near(rv.Score, provider.Score) || !slices.Contains(rv.Badges, "flagged") {
				t.Errorf("%s: a renter sees the new node at %.4f with badges %v, want %.4f, flagged", when, rv.Score, rv.Badges, provider.Score)
			}
			if rv := nodeView(t, m, m.renter, clean); !near(rv.Score, 0.9) || slices.Contains(rv.Badges, "flagged") {
				t.Errorf("%s: a renter sees a clean newcomer at %.4f with badges %v, want 0.9000, not flagged", when, rv.Score, rv.Badges)
			}
		}
		check("at join")
		advice := adviceText(nodeView(t, m, m.admin, sybil))
		for _, want := range []string{"ranks at its flagged provider's score", "its provider's dispute " + v.DisputeID + " upheld (mismatched_result"} {
			if !strings.Contains(advice, want) {
				t.Errorf("the new node's advice:\n%s\nwant it to say %q", advice, want)
			}
		}
		// The uptime measure's first look keeps the bound.
		heartbeatOnly(t, m, 6*time.Minute, append(nodes, sybilNode, cleanNode)...)
		check("after the first look")
	})
}

// A provider flagged by its score (two failed leases of two) bounds its
// other thin node once the uptime measure next looks at it, and a node it
// joins from then on at once.
func TestServer_Reputation_thinNodeOfFlaggedProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, nil)
		onlyOnNode(t, m)
		m.advance(t, 6*time.Minute) // both nodes have their first standings
		runOnNode(t, m, providerFault)
		mustCancel(t, m, runOnNode(t, m, providerFault).JobID) // requeued, and not to fail again
		rival := idlegrid.CallerFromContext(m.rival).NodeID
		const flagged = 9.0 / 12 // the provider's: (0 + 9) / (0 + 9 + 2 + 1)
		if got := reliabilityOf(t, m, m.nodeID); !near(got, flagged) {
			t.Fatalf("barn-1 ranks by %.4f, want %.4f", got, flagged)
		}
		m.advance(t, 11*time.Minute) // the next look at barn-2
		if got := reliabilityOf(t, m, rival); !near(got, flagged) {
			t.Errorf("barn-2, with no evidence of its own, ranks by %.4f, want its flagged provider's %.4f", got, flagged)
		}
		providerID := idlegrid.CallerFromContext(m.rival).AccountID
		fresh, _ := mustJoinUnder(t, m, providerID, "barn-3")
		if got := reliabilityOf(t, m, fresh); !near(got, flagged) {
			t.Errorf("a new node of the flagged provider ranks by %.4f, want %.4f", got, flagged)
		}
		v := nodeView(t, m, m.provider, fresh)
		if !slices.Contains(v.Badges, "flagged") || !strings.Contains(adviceText(v), "its provider is flagged at a score of 0.750") {
			t.Errorf("the new node's badges %v and advice:\n%s\nwant flagged by its provider's score", v.Badges, adviceText(v))
		}
		// Its provider's pooled evidence is its nodes', counted once.
		saved, err := m.store.FindReputation(context.Background(), idlegrid.SubjectProvider, providerID)
		if err != nil {
			t.Fatal(err)
		} else if l := saved.Counts["leases"]; l.Good != 0 || math.Abs(l.Bad-2) > 0.01 || !near(saved.Score, flagged) {
			t.Errorf("provider standing %.4f with leases %+v, want %.4f from 2 failed (a little decayed)", saved.Score, l, flagged)
		}
	})
}

// An honest provider's new node ranks at the newcomer prior as before,
// even when an accident has put its provider below the prior.
func TestServer_Reputation_newNodeOfHonestProvider(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leases []idlegrid.LeaseReport
	}{
		{name: "a clean record", leases: []idlegrid.LeaseReport{succeeded, succeeded}},
		// (9 + 2) / (9 + 2 + 1 + 1) = 0.846, one incident: not flagged.
		{name: "one accident", leases: []idlegrid.LeaseReport{succeeded, succeeded, providerFault}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMarketWith(t, nil)
				onlyOnNode(t, m)
				for _, end := range tc.leases {
					l := runOnNode(t, m, end)
					if end.Fault == idlegrid.FaultProvider {
						mustCancel(t, m, l.JobID) // requeued, and not to fail again
					}
				}
				providerID := idlegrid.CallerFromContext(m.rival).AccountID
				fresh, freshNode := mustJoinUnder(t, m, providerID, "barn-3")
				check := func(when string) {
					t.Helper()
					for _, id := range []string{fresh, idlegrid.CallerFromContext(m.rival).NodeID} {
						if got := reliabilityOf(t, m, id); !near(got, 0.9) {
							t.Errorf("%s: node %s ranks by %.4f, want the newcomer prior 0.9000", when, id, got)
						}
						if v := nodeView(t, m, m.renter, id); slices.Contains(v.Badges, "flagged") || !near(v.Score, 0.9) {
							t.Errorf("%s: a renter sees node %s at %.4f with badges %v, want 0.9000, not flagged", when, id, v.Score, v.Badges)
						}
					}
				}
				check("at join")
				heartbeatOnly(t, m, 6*time.Minute, m.node, m.rival, freshNode)
				check("after the first look")
			})
		})
	}
}
