package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// These tests are the coordinator's side of catching cheating providers
// (docs/trust.md, "Cheating providers, simulated"): heartbeats heard where
// they arrive, leases whose receipts stop, and the trust events logged.

// heartbeatEvery lets d of bubble time pass in 1 s steps while barn-1
// heartbeats every `every` and barn-2 every 5 s.
func heartbeatEvery(t *testing.T, m *testMarket, d, every time.Duration) {
	t.Helper()
	var since time.Duration = every // barn-1 heartbeats at the first step
	for step := time.Second; d > 0; d -= step {
		if since >= every {
			if _, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{}); err != nil {
				t.Fatal(err)
			}
			since = 0
		}
		if int64(d/time.Second)%5 == 0 {
			if _, err := m.srv.Heartbeat(m.rival, idlegrid.HeartbeatRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(step)
		since += step
	}
	synctest.Wait()
}

// factCounts sums barn-1's stored facts by kind.
func factCounts(t *testing.T, m *testMarket) map[string]int64 {
	t.Helper()
	fs, err := m.store.ListReputationFacts(context.Background(), m.nodeID, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, f := range fs {
		out[f.Kind] += f.Count
	}
	return out
}

func upheld(t *testing.T, m *testMarket) []*idlegrid.Dispute {
	t.Helper()
	ds, err := m.store.ListDisputes(context.Background(), idlegrid.DisputeFilter{States: []idlegrid.DisputeState{idlegrid.DisputeUpheld}})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestServer_ReceiptFacts_heartbeatGaps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		every     time.Duration // barn-1's heartbeats, against an interval of 10 s
		want      string        // the fact its two receipts make
		convicted bool
	}{
		// Skipping every other heartbeat is heard half the time: its
		// receipts bill unheard time, and a pattern of them is a forgery.
		{name: "skips every other heartbeat", every: 20 * time.Second, want: "receipt_inconsistent", convicted: true},
		// Late by 40% of an interval each time is jitter, not a gap.
		{name: "honest jitter", every: 14 * time.Second, want: "receipt_consistent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMarketWith(t, nil)
				m.advance(t, 30*time.Second) // the coordinator watches barn-1 from here
				_, l := mustStart(t, m)
				heartbeatEvery(t, m, 2*time.Minute+5*time.Second, tc.every)
				mustSendReceipts(t, m, l.ID, 60, 60)
				if err := m.srv.ReportLease(m.node, l.ID, succeeded); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				got := factCounts(t, m)
				if got[tc.want] != 2 {
					t.Errorf("facts = %v, want both receipts %s", got, tc.want)
				}
				var forged []string
				for _, d := range upheld(t, m) {
					if d.Offence == string(trustpolicy.OffenceForgedReceipt) && d.LeaseID == l.ID {
						forged = append(forged, d.Evidence)
					}
				}
				if (len(forged) == 1) != tc.convicted {
					t.Errorf("forged-receipt convictions = %q, want convicted %v", forged, tc.convicted)
				}
			})
		})
	}
}

// TestServer_ReceiptFacts_oneOutage: a node away once, for less than the
// market lets a node be away before it is lost, whose silence straddles
// two receipts, has both counted inconsistent but is convicted of no
// forgery; away twice, it is.
func TestServer_ReceiptFacts_oneOutage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		silent    func(at time.Duration) bool // when barn-1 sends no heartbeat
		convicted bool
	}{
		{name: "one silence of 45s across the receipts' boundary",
			silent: func(at time.Duration) bool { return at > 35*time.Second && at < 85*time.Second }},
		{name: "two silences", convicted: true, silent: func(at time.Duration) bool {
			return at > 5*time.Second && at < 45*time.Second || at > 75*time.Second && at < 115*time.Second
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Lost after 60 s of silence: 6 heartbeats of 10 s missed.
				m := mustMarketOn(t, nil, func(s idlegrid.Store) idlegrid.Store { return s }, func(c *server.Config) { c.MissedHeartbeats = 6 })
				m.advance(t, 30*time.Second) // the coordinator watches barn-1 from here
				_, l := mustStart(t, m)
				for at := time.Duration(0); at < 2*time.Minute+5*time.Second; at += time.Second {
					if at%(10*time.Second) == 0 && !tc.silent(at) {
						if _, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{}); err != nil {
							t.Fatal(err)
						}
					}
					time.Sleep(time.Second)
				}
				synctest.Wait()
				mustSendReceipts(t, m, l.ID, 60, 60)
				if err := m.srv.ReportLease(m.node, l.ID, succeeded); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if got := factCounts(t, m); got["receipt_inconsistent"] != 2 {
					t.Errorf("facts = %v, want both receipts inconsistent", got)
				}
				forged := slices.ContainsFunc(upheld(t, m), func(d *idlegrid.Dispute) bool {
					return d.Offence == string(trustpolicy.OffenceForgedReceipt) && d.LeaseID == l.ID
				})
				if forged != tc.convicted {
					t.Errorf("convicted of a forged receipt: %v, want %v", forged, tc.convicted)
				}
			})
		})
	}
}

// An honest node whose clock is ahead of the server's (by less than the
// skew the server accepts in its requests) times its receipts late: its
// last ones end after the heartbeats heard so far. They are consistent,
// and nothing is convicted.
func TestServer_ReceiptFacts_fastClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, nil)
		m.advance(t, 30*time.Second) // the coordinator watches barn-1 from here
		_, l := mustStart(t, m)
		l = mustFindLease(t, m, l.ID)
		fast := *l
		began := l.StartedAt.Add(90 * time.Second)
		fast.StartedAt = &began
		var prev *idlegrid.Receipt
		for range 3 {
			m.advance(t, time.Minute)
			rs := chain(&fast, nodeKey(t, m.nodeID), prev, 60)
			if err := m.srv.ReceiveReceipts(m.node, l.ID, rs); err != nil {
				t.Fatal(err)
			}
			prev = &rs[0]
		}
		if err := m.srv.ReportLease(m.node, l.ID, succeeded); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := factCounts(t, m); got["receipt_consistent"] != 3 || got["receipt_inconsistent"] != 0 {
			t.Errorf("facts = %v, want the three receipts consistent", got)
		}
		for _, d := range upheld(t, m) {
			if d.Offence == string(trustpolicy.OffenceForgedReceipt) {
				t.Errorf("an honest node with a fast clock was convicted: %s", d.Evidence)
			}
		}
	})
}

func TestServer_Reap_receiptsStopped(t *testing.T) {
	t.Run("silent lease of a heartbeating node", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, nil)
			_, l := mustStart(t, m)
			m.advance(t, 2*time.Minute)
			mustSendReceipts(t, m, l.ID, 60, 60)
			m.advance(t, 6*time.Minute) // no receipt for 6 min > 5 min (and 3 of its intervals)
			got := mustFindLease(t, m, l.ID)
			if got.State != idlegrid.LeaseFailed || got.Fault != idlegrid.FaultProvider {
				t.Fatalf("lease = %s (fault %q, %q), want failed by the provider", got.State, got.Fault, got.Reason)
			}
			if n := factCounts(t, m)["lease_failed"]; n != 1 {
				t.Errorf("lease_failed facts = %d, want 1", n)
			}
		})
	})
	t.Run("receipts keep coming", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, nil)
			_, l := mustStart(t, m)
			var prev *idlegrid.Receipt
			for range 8 {
				m.advance(t, time.Minute)
				l = mustFindLease(t, m, l.ID)
				rs := chain(l, nodeKey(t, m.nodeID), prev, 60)
				if err := m.srv.ReceiveReceipts(m.node, l.ID, rs); err != nil {
					t.Fatal(err)
				}
				prev = &rs[0]
			}
			if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseRunning {
				t.Fatalf("lease = %s (%q), want still running", got.State, got.Reason)
			}
		})
	})
}

// A node whose clock is behind the server's (by less than the skew the
// server accepts) times its receipts early: an honest lease that runs to
// its time limit has a last receipt that looks older than it is, and must
// not count as abandoned (receiptsStopped allows nodekey.MaxSkew).
func TestServer_Reap_slowClockAtLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, nil)
		spec := testSpec()
		spec.DurationSeconds = 300
		j, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var l *idlegrid.Lease
		for _, got := range pendingStarts(t, m) {
			if got.JobID == j.ID {
				l = got
			}
		}
		if l == nil {
			t.Fatal("the job was not placed on barn-1")
		}
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
			t.Fatal(err)
		}
		// The node's clock is 90 s behind: its receipts start and end 90 s
		// before the server's time.
		l = mustFindLease(t, m, l.ID)
		slow := *l
		began := l.StartedAt.Add(-90 * time.Second)
		slow.StartedAt = &began
		var prev *idlegrid.Receipt
		for range 5 {
			m.advance(t, time.Minute)
			rs := chain(&slow, nodeKey(t, m.nodeID), prev, 60)
			if err := m.srv.ReceiveReceipts(m.node, l.ID, rs); err != nil {
				t.Fatal(err)
			}
			prev = &rs[0]
		}
		// Past its limit and limitGrace, the reaper asks for the stop.
		m.advance(t, time.Minute)
		got := mustFindLease(t, m, l.ID)
		if got.State != idlegrid.LeaseRunning || got.StopRequested == "" {
			t.Fatalf("lease = %s (fault %q, %q, stop %q), want running with the limit's stop asked", got.State, got.Fault, got.Reason, got.StopRequested)
		}
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseCancelled {
			t.Errorf("lease = %s (fault %q, %q), want cancelled at its limit", got.State, got.Fault, got.Reason)
		}
		if n := factCounts(t, m)["lease_failed"]; n != 0 {
			t.Errorf("lease_failed facts = %d, want none", n)
		}
	})
}

func TestServer_ReportLease_abandonedBeforeStop(t *testing.T) {
	for _, tc := range []struct {
		name       string
		finalSecs  int64 // the last receipt, sent with the stop's confirmation; 0: none
		wantState  idlegrid.LeaseState
		wantFacts  int64 // lease_failed
		wantFaulty bool
	}{
		{name: "abandoned, then answers the stop", wantState: idlegrid.LeaseFailed, wantFacts: 1, wantFaulty: true},
		{name: "ran until the stop", finalSecs: 180, wantState: idlegrid.LeaseCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMarketWith(t, nil)
				j, l := mustStart(t, m)
				m.advance(t, time.Minute)
				rs := mustSendReceipts(t, m, l.ID, 60)
				m.advance(t, 3*time.Minute) // under the receipt silence: the reaper leaves it
				if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
					t.Fatal(err)
				}
				if tc.finalSecs > 0 {
					if err := m.srv.ReceiveReceipts(m.node, l.ID, chain(mustFindLease(t, m, l.ID), nodeKey(t, m.nodeID), &rs[0], tc.finalSecs)); err != nil {
						t.Fatal(err)
					}
				}
				if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				got := mustFindLease(t, m, l.ID)
				if got.State != tc.wantState || (got.Fault == idlegrid.FaultProvider) != tc.wantFaulty {
					t.Errorf("lease = %s (fault %q, %q), want %s", got.State, got.Fault, got.Reason, tc.wantState)
				}
				if n := factCounts(t, m)["lease_failed"]; n != tc.wantFacts {
					t.Errorf("lease_failed facts = %d, want %d", n, tc.wantFacts)
				}
				mustLedgerBalanced(t, m.store)
			})
		})
	}
}

func auditKinds(t *testing.T, s idlegrid.Store, subject string) []string {
	t.Helper()
	es, err := s.ListAuditEntries(context.Background(), idlegrid.AuditFilter{Subject: subject, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Kind)
	}
	return out
}

func TestServer_AuditTrustPolicy(t *testing.T) {
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, sqlstoretest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stricter := mustPolicy("version: 1\nreputation: {flag_below: 0.85}\n")
	for i, tc := range []struct {
		policy *trustpolicy.Policy
		want   int // trust.policy entries after this start
	}{
		{nil, 1},      // the first start logs the policy in force
		{nil, 1},      // the same policy again: nothing new
		{stricter, 2}, // another policy file
		{nil, 3},      // and back
	} {
		srv, err := server.Open(server.Config{Store: store, Logger: testLogger, TrustPolicy: tc.policy})
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
		got := auditKinds(t, store, server.PolicySubject)
		if len(got) != tc.want || slices.IndexFunc(got, func(k string) bool { return k != string(audit.KindPolicy) }) >= 0 {
			t.Fatalf("start %d: policy entries = %v, want %d of %s", i, got, tc.want, audit.KindPolicy)
		}
	}
	es, err := store.ListAuditEntries(ctx, idlegrid.AuditFilter{Subject: server.PolicySubject, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var last struct {
		SHA256 string `json:"sha256"`
	}
	if err := json.Unmarshal(es[len(es)-1].Payload, &last); err != nil || last.SHA256 != trustpolicy.Default().SHA256 {
		t.Errorf("last policy logged = %+v (%v), want the default's SHA-256", last, err)
	}
}

func TestServer_AuditTrustEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, levelsByScore)
		mustVerify(t, m, m.node, m.nodeID, "barn-1") // its hardware verified: level 1
		time.Sleep(time.Hour)                        // the bubble's clock: challenges come in order
		cs, err := m.srv.ChallengeNode(m.admin, m.nodeID)
		if err != nil || len(cs) != 2 {
			t.Fatalf("ChallengeNode = %d challenges, %v; want one per GPU", len(cs), err)
		}
		honest, liar := cs[0], cs[1]
		mustAnswer(t, m, m.node, honest, answer(t, honest, "RTX4090", 24000))
		if got := mustAnswer(t, m, m.node, liar, answer(t, liar, "RTX3090", 24000)); got.State != idlegrid.ChallengeFailed {
			t.Fatalf("liar's challenge = %s, want failed", got.State)
		}
		synctest.Wait()
		kinds := auditKinds(t, m.store, m.nodeID)
		count := func(k string) int {
			n := 0
			for _, x := range kinds {
				if x == k {
					n++
				}
			}
			return n
		}
		if count(string(audit.KindAttestation)) != 1 || count(string(audit.KindChallenge)) != 4 {
			t.Errorf("barn-1's entries = %v, want one %s and four %s", kinds, audit.KindAttestation, audit.KindChallenge)
		}
		// A verified newcomer holds level 1 under levelsByScore; the failed
		// challenge quarantines barn-1, which demotes it to level 0.
		if count(string(audit.KindLevelChange)) < 2 {
			t.Errorf("barn-1's entries = %v, want its promotion and its demotion (%s)", kinds, audit.KindLevelChange)
		}
		es, err := m.store.ListAuditEntries(context.Background(), idlegrid.AuditFilter{Subject: m.nodeID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var last struct {
			From, To int
			Reasons  []string
		}
		for _, e := range es {
			if e.Kind == string(audit.KindLevelChange) {
				if err := json.Unmarshal(e.Payload, &last); err != nil {
					t.Fatal(err)
				}
			}
		}
		if last.From < 1 || last.To != 0 || len(last.Reasons) == 0 {
			t.Errorf("last level change = %+v, want from its level to 0 with reasons", last)
		}
	})
}

func TestServer_Verification_firstChecks(t *testing.T) {
	verifiable := testSpec()
	verifiable.Verifiable = true
	for _, tc := range []struct {
		firstChecks int
		want        int // verifications after three verifiable leases
	}{
		{firstChecks: 0, want: 0},
		// Both test nodes are one provider's, so the re-runs wait for
		// another provider: two checks pending stop the third.
		{firstChecks: 2, want: 2},
	} {
		t.Run(fmt.Sprintf("first_checks %d", tc.firstChecks), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMarketWith(t, mustPolicy(fmt.Sprintf(
					"version: 1\ngold: {min_level: 0}\nverification: {sample_fraction: 0, newcomer_sample_fraction: 0, first_checks: %d}\n", tc.firstChecks)))
				for i := range 3 {
					j, err := m.srv.SubmitJob(m.renter, verifiable)
					if err != nil {
						t.Fatal(err)
					}
					mustRunDigest(t, m, []context.Context{m.node, m.rival}, j.ID, fmt.Sprintf("sha256:%d", i))
				}
				vs, err := m.srv.ListVerifications(m.admin, idlegrid.VerificationFilter{})
				if err != nil {
					t.Fatal(err)
				}
				if len(vs) != tc.want {
					t.Errorf("%d verifications, want %d", len(vs), tc.want)
				}
			})
		})
	}
}
