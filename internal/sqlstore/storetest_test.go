package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// runStoreTests holds a store to the idlegrid.Store contract. newDSN returns
// the DSN of a fresh, empty store for each test.
func runStoreTests(t *testing.T, newDSN func(t *testing.T) string) {
	open := func(t *testing.T) *sqlstore.DB { return mustOpen(t, newDSN(t)) }
	for _, tt := range []struct {
		name string
		test func(t *testing.T, db *sqlstore.DB)
	}{
		{"Accounts", testAccounts},
		{"Accounts_Names", testAccountNames},
		{"Accounts_NamesMigration", testAccountNamesMigration},
		{"Accounts_IdempotencyKeys", testAccountIdempotencyKeys},
		{"APIKeys", testAPIKeys},
		{"JoinTokens", testJoinTokens},
		{"Secrets_IdempotencyKeys", testSecretIdempotencyKeys},
		{"RegistryLogins", testRegistryLogins},
		{"JoinNode", testJoinNode},
		{"Nodes", testNodes},
		{"Jobs", testJobs},
		{"Concurrency_CreateJob", testConcurrentCreateJob},
		{"Jobs_IdempotencyKeys", testJobIdempotencyKeys},
		{"Jobs_NamePrefix", testJobNamePrefix},
		{"Jobs_Tiers", testJobTiers},
		{"CancelQueuedJob", testCancelQueuedJob},
		{"CancelJob", testCancelJob},
		{"CancelJob_Requeued", testCancelJobRequeued},
		{"CancelJob_Migration", testCancelJobMigration},
		{"PlaceJob", testPlaceJob},
		{"PlaceJob_Conflicts", testPlaceJobConflicts},
		{"PlaceJobs", testPlaceJobs},
		{"PlaceJobsTogether", testPlaceJobsTogether},
		{"Concurrency_PlaceJobs", testConcurrentPlaceJobs},
		{"List_BeyondDefaultLimit", testListBeyondDefaultLimit},
		{"TransitionLease", testTransitionLease},
		{"LeavingHeartbeats", testLeavingHeartbeats},
		{"TransitionLease_Outcomes", testTransitionOutcomes},
		{"TransitionLease_ResumeFrom", testResumeFrom},
		{"TransitionLease_MultiNode", testTransitionMultiNode},
		{"TransitionLease_Errors", testTransitionErrors},
		{"RequestLeaseStop", testRequestLeaseStop},
		{"SetLeaseProgress", testSetLeaseProgress},
		{"ListLeases", testListLeases},
		{"LeasesToReap", testLeasesToReap},
		{"RenterStakes", testRenterStakes},
		{"Logs", testLogs},
		{"Receipts", testReceipts},
		{"Concurrency_Receipts", testConcurrentReceipts},
		{"PostTransfer", testPostTransfer},
		{"ListTransfers", testListTransfers},
		{"Balance", testBalance},
		{"Summary", testSummary},
		{"Concurrency_PlaceJob", testConcurrentPlaceJob},
		{"Concurrency_Transfers", testConcurrentTransfers},
		{"Attestations", testAttestations},
		{"Challenges", testChallenges},
		{"Quarantine", testQuarantine},
		{"Audit", testAudit},
		{"Disputes", testDisputes},
		{"Disputes_IdempotencyKeys", testDisputeIdempotencyKeys},
		{"Verifications", testVerifications},
		{"TrustLists_Paging", testTrustListPaging},
		{"Reputation", testReputation},
		{"Reputation_Conflicts", testReputationConflicts},
		{"Reputation_NodeRecord", testReputationNodeRecord},
		{"Reputation_Together", testReputationTogether},
		{"HeartbeatSpans", testHeartbeatSpans},
		{"HeartbeatsTogether", testHeartbeatsTogether},
		{"KeptResponses", testKeptResponses},
		{"KeptResponses_Chain", testKeptResponsesChain},
		{"KeptResponses_Expiry", testKeptResponsesExpiry},
		{"KeptResponses_Update", testKeptResponsesUpdate},
		{"KeptResponses_Hold", testKeptResponsesHold},
		{"Conversations", testConversations},
		{"Conversations_Items", testConversationItems},
		{"Conversations_OtherRenter", testConversationsOtherRenter},
		{"Conversations_Delete", testConversationsDelete},
		{"Conversations_History", testConversationHistory},
		{"Conversations_Concurrent", testConversationsConcurrent},
		{"Conversations_FindItem", testConversationsFindItem},
		{"Conversations_Usage", testConversationsUsage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, open(t))
		})
	}
	for _, tt := range scheduleTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, open(t))
		})
	}
	for _, tt := range expiryTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, open(t))
		})
	}
	for _, tt := range followUpTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, open(t))
		})
	}
	for _, tt := range moneyTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, open(t))
		})
	}
	t.Run("Reopen", func(t *testing.T) {
		t.Parallel()
		testReopen(t, newDSN(t))
	})
	t.Run("MarketLock", func(t *testing.T) {
		t.Parallel()
		testMarketLock(t, newDSN(t))
	})
}

func testAccounts(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	a := &idlegrid.Account{ID: "acct_a", Name: "Ada", Role: idlegrid.RoleRenter, CreatedAt: t0}
	b := &idlegrid.Account{ID: "acct_b", Name: "Bob", Role: idlegrid.RoleProvider, CreatedAt: at(time.Second)}
	mustOK(t, db.CreateAccount(ctx, a))
	mustOK(t, db.CreateAccount(ctx, b))

	t.Run("Find", func(t *testing.T) {
		got, err := db.FindAccount(ctx, "acct_a")
		mustOK(t, err)
		if diff := cmp.Diff(a, got); diff != "" {
			t.Errorf("FindAccount (-want +got):\n%s", diff)
		}
		_, err = db.FindAccount(ctx, "acct_missing")
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
	t.Run("List", func(t *testing.T) {
		c := &idlegrid.Account{ID: "acct_c", Name: "Cy", Role: idlegrid.RoleRenter, CreatedAt: at(time.Second)}
		mustOK(t, db.CreateAccount(ctx, c))
		for _, tc := range []struct {
			f    idlegrid.AccountFilter
			want []*idlegrid.Account
		}{
			{idlegrid.AccountFilter{}, []*idlegrid.Account{a, b, c}},
			{idlegrid.AccountFilter{Role: idlegrid.RoleRenter}, []*idlegrid.Account{a, c}},
			{idlegrid.AccountFilter{Limit: 2}, []*idlegrid.Account{a, b}},
			{idlegrid.AccountFilter{After: "acct_b"}, []*idlegrid.Account{c}}, // b and c share a time: by ID
			{idlegrid.AccountFilter{Role: idlegrid.RoleRenter, After: "acct_a", Limit: 1}, []*idlegrid.Account{c}},
			{idlegrid.AccountFilter{After: "acct_c"}, nil},
			{idlegrid.AccountFilter{After: "acct_missing"}, nil},
		} {
			got, err := db.ListAccounts(ctx, tc.f)
			mustOK(t, err)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListAccounts(%+v) (-want +got):\n%s", tc.f, diff)
			}
		}
	})
	t.Run("Duplicate", func(t *testing.T) {
		wantCode(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_a", Name: "x", Role: idlegrid.RoleAdmin, CreatedAt: t0}), idlegrid.ECONFLICT)
	})
	t.Run("Invalid", func(t *testing.T) {
		wantCode(t, db.CreateAccount(ctx, &idlegrid.Account{Name: "x", Role: idlegrid.RoleAdmin}), idlegrid.EINVALID)
		wantCode(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_c", Name: "x", Role: "boss"}), idlegrid.EINVALID)
	})
}

func testAPIKeys(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	a := mustAccount(t, db, idlegrid.RoleRenter)
	other := mustAccount(t, db, idlegrid.RoleRenter)
	k1 := &idlegrid.APIKey{ID: "key_1", AccountID: a.ID, Name: "laptop", Prefix: "igk_abc", Access: idlegrid.AccessUse, Hash: "h1", CreatedAt: t0}
	k2 := &idlegrid.APIKey{ID: "key_2", AccountID: a.ID, Name: "ci", Prefix: "igk_def", Hash: "h2", CreatedAt: at(time.Second)}
	mustOK(t, db.CreateAPIKey(ctx, k1))
	mustOK(t, db.CreateAPIKey(ctx, k2))
	k2.Access = idlegrid.AccessAll // a key made without an access may do everything

	t.Run("Find", func(t *testing.T) {
		k, acct, err := db.FindAPIKey(ctx, "h1")
		mustOK(t, err)
		if diff := cmp.Diff(k1, k); diff != "" {
			t.Errorf("key (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(a, acct); diff != "" {
			t.Errorf("account (-want +got):\n%s", diff)
		}
		_, _, err = db.FindAPIKey(ctx, "nope")
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
	t.Run("Create", func(t *testing.T) {
		wantCode(t, db.CreateAPIKey(ctx, &idlegrid.APIKey{ID: "key_3", AccountID: "acct_missing", Hash: "h3", CreatedAt: t0}), idlegrid.ENOTFOUND)
		wantCode(t, db.CreateAPIKey(ctx, &idlegrid.APIKey{ID: "key_1", AccountID: a.ID, Hash: "h4", CreatedAt: t0}), idlegrid.ECONFLICT)
		wantCode(t, db.CreateAPIKey(ctx, &idlegrid.APIKey{ID: "key_5", AccountID: a.ID, Hash: "h1", CreatedAt: t0}), idlegrid.ECONFLICT)
		wantCode(t, db.CreateAPIKey(ctx, &idlegrid.APIKey{AccountID: a.ID, Hash: "h6", CreatedAt: t0}), idlegrid.EINVALID)
		wantCode(t, db.CreateAPIKey(ctx, &idlegrid.APIKey{ID: "key_7", AccountID: a.ID, Access: "root", Hash: "h7", CreatedAt: t0}), idlegrid.EINVALID)
	})
	t.Run("Revoke", func(t *testing.T) {
		wantCode(t, db.RevokeAPIKey(ctx, other.ID, "key_1", at(time.Hour)), idlegrid.ENOTFOUND)
		mustOK(t, db.RevokeAPIKey(ctx, a.ID, "key_1", at(time.Hour)))
		mustOK(t, db.RevokeAPIKey(ctx, a.ID, "key_1", at(2*time.Hour))) // keeps the first time
		_, _, err := db.FindAPIKey(ctx, "h1")
		wantCode(t, err, idlegrid.ENOTFOUND)
		wantCode(t, db.RevokeAPIKey(ctx, a.ID, "key_missing", at(time.Hour)), idlegrid.ENOTFOUND)

		got, err := db.ListAPIKeys(ctx, a.ID)
		mustOK(t, err)
		k1.RevokedAt = ptr(at(time.Hour))
		if diff := cmp.Diff([]*idlegrid.APIKey{k1, k2}, got); diff != "" {
			t.Errorf("ListAPIKeys (-want +got):\n%s", diff)
		}
		if got, err := db.ListAPIKeys(ctx, other.ID); err != nil || len(got) != 0 {
			t.Errorf("ListAPIKeys(other) = %v, %v; want none", got, err)
		}
	})
	t.Run("Access", func(t *testing.T) {
		third := mustAccount(t, db, idlegrid.RoleAdmin) // admins' keys may be restricted too
		for i, access := range []idlegrid.Access{idlegrid.AccessAll, idlegrid.AccessUse, idlegrid.AccessRead} {
			k := &idlegrid.APIKey{ID: "key_" + string(access), AccountID: third.ID, Name: string(access), Access: access,
				Hash: "h_" + string(access), CreatedAt: at(time.Duration(i) * time.Second)}
			mustOK(t, db.CreateAPIKey(ctx, k))
			got, _, err := db.FindAPIKey(ctx, k.Hash)
			mustOK(t, err)
			if got.Access != access {
				t.Errorf("FindAPIKey: access = %q, want %q", got.Access, access)
			}
		}
		keys, err := db.ListAPIKeys(ctx, third.ID)
		mustOK(t, err)
		var got []idlegrid.Access
		for _, k := range keys {
			got = append(got, k.Access)
		}
		if want := []idlegrid.Access{idlegrid.AccessAll, idlegrid.AccessUse, idlegrid.AccessRead}; !slices.Equal(got, want) {
			t.Errorf("ListAPIKeys: accesses %q, want %q", got, want)
		}
		// Keys made before keys had an access may do everything, as they could.
		mustOK(t, sqlstore.Remigrate(ctx, db, 30))
		keys, err = db.ListAPIKeys(ctx, third.ID)
		mustOK(t, err)
		for _, k := range keys {
			if k.Access != idlegrid.AccessAll {
				t.Errorf("after the migration, key %s has access %q, want all", k.Name, k.Access)
			}
		}
	})
}

func testJoinTokens(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	other := mustAccount(t, db, idlegrid.RoleProvider)
	tok := mustJoinToken(t, db, p.ID, 3)

	wantCode(t, db.CreateJoinToken(ctx, &idlegrid.JoinToken{ID: "jt_x", ProviderID: "acct_missing", Hash: "hx", ExpiresAt: at(time.Hour), CreatedAt: t0}), idlegrid.ENOTFOUND)
	wantCode(t, db.CreateJoinToken(ctx, &idlegrid.JoinToken{ID: tok.ID, ProviderID: p.ID, Hash: "hy", ExpiresAt: at(time.Hour), CreatedAt: t0}), idlegrid.ECONFLICT)
	wantCode(t, db.CreateJoinToken(ctx, &idlegrid.JoinToken{ID: "jt_z", ProviderID: p.ID, Hash: "hz", MaxUses: -1}), idlegrid.EINVALID)
	wantCode(t, db.CreateJoinToken(ctx, &idlegrid.JoinToken{ID: "jt_w", ProviderID: p.ID, Hash: "hw"}), idlegrid.EINVALID)

	wantCode(t, db.RevokeJoinToken(ctx, other.ID, tok.ID, at(time.Hour)), idlegrid.ENOTFOUND)
	mustOK(t, db.RevokeJoinToken(ctx, p.ID, tok.ID, at(time.Hour)))
	got, err := db.ListJoinTokens(ctx, p.ID)
	mustOK(t, err)
	tok.RevokedAt = ptr(at(time.Hour))
	if diff := cmp.Diff([]*idlegrid.JoinToken{tok}, got); diff != "" {
		t.Errorf("ListJoinTokens (-want +got):\n%s", diff)
	}
	found, err := db.FindJoinToken(ctx, tok.Hash)
	mustOK(t, err)
	if diff := cmp.Diff(tok, found); diff != "" {
		t.Errorf("FindJoinToken of a revoked token (-want +got):\n%s", diff)
	}
	_, err = db.FindJoinToken(ctx, "no-such-hash")
	wantCode(t, err, idlegrid.ENOTFOUND)
}

func testJoinNode(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	newNode := func(when time.Time) *idlegrid.Node {
		nodeID := id("node")
		return &idlegrid.Node{ID: nodeID, PublicKey: "key-" + nodeID, Offer: offer(nodeID, 2), AgentVersion: "v1", CreatedAt: when}
	}

	t.Run("OK", func(t *testing.T) {
		tok := mustJoinToken(t, db, p.ID, 2)
		n := newNode(t0)
		mustOK(t, db.JoinNode(ctx, tok.Hash, n))
		want := *n
		want.ProviderID, want.State, want.Reliability = p.ID, idlegrid.NodeOffline, 0.9
		got, err := db.FindNode(ctx, n.ID)
		mustOK(t, err)
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("node (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(&want, n); diff != "" {
			t.Errorf("JoinNode's n (-want +got):\n%s", diff)
		}
		// The join is logged with the node's key, for its provider and
		// the node to find.
		for _, subject := range []string{n.ID, p.ID} {
			if logged := auditKinds(t, db, subject, audit.KindNodeJoined); len(logged) != 1 ||
				!strings.Contains(string(logged[0].Payload), `"public_key":"`+n.PublicKey+`"`) {
				t.Errorf("node.joined entries of %s = %v, want one with the node's key", subject, logged)
			}
		}
		toks, err := db.ListJoinTokens(ctx, p.ID)
		mustOK(t, err)
		for _, x := range toks {
			if x.ID == tok.ID && x.Uses != 1 {
				t.Errorf("token uses = %d, want 1", x.Uses)
			}
		}
	})
	t.Run("UsedUp", func(t *testing.T) {
		tok := mustJoinToken(t, db, p.ID, 1)
		mustOK(t, db.JoinNode(ctx, tok.Hash, newNode(t0)))
		wantCode(t, db.JoinNode(ctx, tok.Hash, newNode(t0)), idlegrid.EUNAUTHORIZED)
	})
	t.Run("Expired", func(t *testing.T) {
		tok := mustJoinToken(t, db, p.ID, 0)
		wantCode(t, db.JoinNode(ctx, tok.Hash, newNode(tok.ExpiresAt)), idlegrid.EUNAUTHORIZED)
	})
	t.Run("Revoked", func(t *testing.T) {
		tok := mustJoinToken(t, db, p.ID, 0)
		mustOK(t, db.RevokeJoinToken(ctx, p.ID, tok.ID, t0))
		wantCode(t, db.JoinNode(ctx, tok.Hash, newNode(t0)), idlegrid.EUNAUTHORIZED)
	})
	t.Run("UnknownToken", func(t *testing.T) {
		wantCode(t, db.JoinNode(ctx, "no such hash", newNode(t0)), idlegrid.EUNAUTHORIZED)
	})
	t.Run("KnownKey", func(t *testing.T) {
		tok := mustJoinToken(t, db, p.ID, 0)
		n := newNode(t0)
		mustOK(t, db.JoinNode(ctx, tok.Hash, n))
		again := newNode(t0)
		again.PublicKey = n.PublicKey
		wantCode(t, db.JoinNode(ctx, tok.Hash, again), idlegrid.ECONFLICT)
		toks, err := db.ListJoinTokens(ctx, p.ID)
		mustOK(t, err)
		for _, x := range toks {
			if x.ID == tok.ID && x.Uses != 1 {
				t.Errorf("a failed join used the token: uses = %d, want 1", x.Uses)
			}
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		tok := mustJoinToken(t, db, p.ID, 0)
		n := newNode(t0)
		n.ID = ""
		wantCode(t, db.JoinNode(ctx, tok.Hash, n), idlegrid.EINVALID)
	})
}

func testNodes(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p1 := mustAccount(t, db, idlegrid.RoleProvider)
	p2 := mustAccount(t, db, idlegrid.RoleProvider)
	n1 := mustNode(t, db, p1.ID, 2)
	n2 := mustNode(t, db, p1.ID, 4)
	n3 := mustNode(t, db, p2.ID, 1)

	t.Run("UpdateOffer", func(t *testing.T) {
		o := offer(n1.ID, 3)
		o.Ask.AllowedKinds = []idlegrid.WorkloadKind{idlegrid.KindInference}
		o.Schedule.OneOff = []idlegrid.OneOffWindow{{Start: at(time.Hour), End: at(5 * time.Hour)}}
		mustOK(t, db.UpdateOffer(ctx, n1.ID, o, "v2", at(time.Minute)))
		got, err := db.FindNode(ctx, n1.ID)
		mustOK(t, err)
		want := *n1
		want.Offer, want.AgentVersion, want.State, want.LastHeartbeat = o, "v2", idlegrid.NodeOnline, at(time.Minute)
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("node (-want +got):\n%s", diff)
		}
		wantCode(t, db.UpdateOffer(ctx, "node_missing", o, "v2", t0), idlegrid.ENOTFOUND)
		n1 = got
	})
	t.Run("SetNodeDraining", func(t *testing.T) {
		got, err := db.SetNodeDraining(ctx, n3.ID, ptr(at(time.Minute)))
		mustOK(t, err)
		if got.DrainingSince == nil || !got.DrainingSince.Equal(at(time.Minute)) {
			t.Fatalf("draining since %v, want %v", got.DrainingSince, at(time.Minute))
		}
		again, err := db.SetNodeDraining(ctx, n3.ID, ptr(at(time.Hour))) // a drain under way keeps its start
		mustOK(t, err)
		read, err := db.FindNode(ctx, n3.ID)
		mustOK(t, err)
		for _, n := range []*idlegrid.Node{again, read} {
			if n.DrainingSince == nil || !n.DrainingSince.Equal(at(time.Minute)) {
				t.Errorf("draining since %v after draining again, want the first start, %v", n.DrainingSince, at(time.Minute))
			}
		}
		online, err := db.ListNodes(ctx, idlegrid.NodeFilter{ProviderID: p2.ID})
		mustOK(t, err)
		if len(online) != 1 || online[0].DrainingSince == nil {
			t.Errorf("listed: %+v, want the node, draining", online)
		}
		done, err := db.SetNodeDraining(ctx, n3.ID, nil)
		mustOK(t, err)
		if read, _ := db.FindNode(ctx, n3.ID); done.DrainingSince != nil || read.DrainingSince != nil {
			t.Errorf("after the drain ended: %v, stored %v; want none", done.DrainingSince, read.DrainingSince)
		}
		_, err = db.SetNodeDraining(ctx, "node_missing", ptr(t0))
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
	t.Run("SetNodeState", func(t *testing.T) {
		// A node that beat after the heartbeat its reaper saw is not lost.
		wantCode(t, db.SetNodeState(ctx, n2.ID, idlegrid.NodeLost, t0.Add(-time.Second)), idlegrid.ECONFLICT)
		if got, err := db.FindNode(ctx, n2.ID); err != nil || got.State != idlegrid.NodeOnline {
			t.Fatalf("node after a late loss: %+v, %v; want still online", got, err)
		}
		mustOK(t, db.SetNodeState(ctx, n2.ID, idlegrid.NodeLost, at(time.Hour)))
		got, err := db.FindNode(ctx, n2.ID)
		mustOK(t, err)
		if got.State != idlegrid.NodeLost || !got.LastHeartbeat.Equal(t0) {
			t.Errorf("node is %s, last heartbeat %v; want lost, %v", got.State, got.LastHeartbeat, t0)
		}
		wantCode(t, db.SetNodeState(ctx, n2.ID, "asleep", t0), idlegrid.EINVALID)
		wantCode(t, db.SetNodeState(ctx, "node_missing", idlegrid.NodeLost, t0), idlegrid.ENOTFOUND)
	})
	t.Run("Heartbeat", func(t *testing.T) {
		mustOK(t, db.SetNodeState(ctx, n3.ID, idlegrid.NodeOffline, at(time.Hour)))
		standing, err := db.Heartbeat(ctx, n3.ID, at(2*time.Hour))
		mustOK(t, err)
		if standing != (idlegrid.NodeStanding{}) {
			t.Errorf("a node in the market: standing %+v, want none", standing)
		}
		got, err := db.FindNode(ctx, n3.ID)
		mustOK(t, err)
		if got.State != idlegrid.NodeOnline || !got.LastHeartbeat.Equal(at(2*time.Hour)) {
			t.Errorf("node is %s, last heartbeat %v; want online, %v", got.State, got.LastHeartbeat, at(2*time.Hour))
		}
		_, err = db.Heartbeat(ctx, "node_missing", t0)
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
	t.Run("HeartbeatStanding", func(t *testing.T) {
		since := at(90 * time.Minute)
		_, err := db.SetNodeDraining(ctx, n3.ID, &since)
		mustOK(t, err)
		mustOK(t, db.QuarantineNode(ctx, &idlegrid.Quarantine{ID: id("qua"), NodeID: n3.ID, Reason: "failed a challenge", Since: since}))
		standing, err := db.Heartbeat(ctx, n3.ID, at(2*time.Hour))
		mustOK(t, err)
		if !standing.Quarantined || standing.DrainingSince == nil || !standing.DrainingSince.Equal(since) {
			t.Errorf("a draining, quarantined node: standing %+v, want both, draining since %v", standing, since)
		}
		_, err = db.SetNodeDraining(ctx, n3.ID, nil)
		mustOK(t, err)
		_, err = db.LiftQuarantine(ctx, n3.ID, "acct_admin", "", at(2*time.Hour))
		mustOK(t, err)
		if standing, err = db.Heartbeat(ctx, n3.ID, at(2*time.Hour)); err != nil || standing != (idlegrid.NodeStanding{}) {
			t.Errorf("drain undone, quarantine lifted: standing %+v, %v; want none", standing, err)
		}
	})
	t.Run("OnlineHeartbeats", func(t *testing.T) {
		got, err := db.OnlineHeartbeats(ctx)
		mustOK(t, err)
		// n1 beat at 1m (UpdateOffer), n3 at 2h; n2 is lost.
		want := map[string]time.Time{n1.ID: at(time.Minute), n3.ID: at(2 * time.Hour)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("OnlineHeartbeats (-want +got):\n%s", diff)
		}
	})
	t.Run("Find", func(t *testing.T) {
		_, err := db.FindNode(ctx, "node_missing")
		wantCode(t, err, idlegrid.ENOTFOUND)
		// Text PostgreSQL cannot hold is the caller's mistake, not the
		// store's failure; SQLite holds it and finds no such node.
		for _, id := range []string{"node_\x00", "node_\xff\xfe"} {
			_, err := db.FindNode(ctx, id)
			if c := idlegrid.ErrorCode(err); c != idlegrid.ENOTFOUND && c != idlegrid.EINVALID {
				t.Errorf("FindNode(%q): %v (%s), want not found or invalid", id, err, c)
			}
		}
	})
	t.Run("Offered", func(t *testing.T) {
		offered := func(limit int) []string {
			t.Helper()
			got, err := db.ListNodes(ctx, idlegrid.NodeFilter{Offered: true, Limit: limit})
			mustOK(t, err)
			return nodeIDs(got)
		}
		// n2 is lost; n1 and n3 are online, oldest first.
		if got := offered(0); !slices.Equal(got, []string{n1.ID, n3.ID}) {
			t.Fatalf("offered nodes: %v, want %s and %s", got, n1.ID, n3.ID)
		}
		if got := offered(1); !slices.Equal(got, []string{n1.ID}) {
			t.Fatalf("the first offered node: %v, want %s", got, n1.ID)
		}
		mustOK(t, db.QuarantineNode(ctx, &idlegrid.Quarantine{ID: id("qua"), NodeID: n1.ID, Reason: "under review", Since: at(time.Hour)}))
		if got := offered(0); !slices.Equal(got, []string{n3.ID}) {
			t.Fatalf("offered nodes with %s in quarantine: %v, want %s alone", n1.ID, got, n3.ID)
		}
		_, err := db.LiftQuarantine(ctx, n1.ID, "acct_admin", "reviewed", at(time.Hour))
		mustOK(t, err)
		_, err = db.SetNodeDraining(ctx, n3.ID, ptr(at(time.Hour)))
		mustOK(t, err)
		if got := offered(0); !slices.Equal(got, []string{n1.ID}) {
			t.Fatalf("offered nodes with %s draining: %v, want %s alone", n3.ID, got, n1.ID)
		}
		_, err = db.SetNodeDraining(ctx, n3.ID, nil)
		mustOK(t, err)
	})
	t.Run("Search", func(t *testing.T) {
		search := func(f idlegrid.NodeFilter) []string {
			t.Helper()
			got, err := db.ListNodes(ctx, f)
			mustOK(t, err)
			return nodeIDs(got)
		}
		o := offer(n3.ID, 2)
		o.Name, o.Region, o.GPUs[0].Model, o.GPUs[1].Model = "barn", "us-east", "A100-80GB", "L40S"
		o.GPUs[0].VRAMMB, o.GPUs[1].VRAMMB = 40960, 49152
		o.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 800_000, idlegrid.TierBronze: 300_000}
		mustOK(t, db.UpdateOffer(ctx, n3.ID, o, "v2", at(2*time.Hour)))
		o2 := n2.Offer // n2 (4 H100s, lost) sells gold too, and silver dearer than n1; it shares n3's name
		o2.Name = "barn"
		o2.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierGold: 3_000_000, idlegrid.TierSilver: 2_000_000}
		mustOK(t, db.UpdateOffer(ctx, n2.ID, o2, "v2", at(2*time.Hour)))
		mustOK(t, db.SetNodeState(ctx, n2.ID, idlegrid.NodeLost, at(2*time.Hour)))
		// n1: 3 H100s, silver $1; n2: 4 H100s, gold $3, silver $2; n3: 2 (48 GB at most), silver $0.80, bronze $0.30.
		for _, version := range []int64{0, 41, 21, 20} {
			if version > 0 { // the migrations that added the search find the same from the offers
				mustOK(t, sqlstore.Remigrate(ctx, db, version))
			}
			remigrated := version
			for _, tc := range []struct {
				f    idlegrid.NodeFilter
				want []string
			}{
				{idlegrid.NodeFilter{MinGPUs: 4}, []string{n2.ID}},
				{idlegrid.NodeFilter{MinGPUs: 3}, []string{n1.ID, n2.ID}},
				{idlegrid.NodeFilter{MinVRAMMB: 49152}, []string{n1.ID, n2.ID, n3.ID}},
				{idlegrid.NodeFilter{MinVRAMMB: 49153}, []string{n1.ID, n2.ID}},
				{idlegrid.NodeFilter{Tier: idlegrid.TierGold}, []string{n2.ID}},
				{idlegrid.NodeFilter{Tier: idlegrid.TierBronze}, []string{n3.ID}},
				{idlegrid.NodeFilter{Tier: idlegrid.TierSilver, MaxFloor: 1_000_000}, []string{n1.ID, n3.ID}},
				{idlegrid.NodeFilter{Tier: idlegrid.TierSilver, MaxFloor: 999_999}, []string{n3.ID}},
				{idlegrid.NodeFilter{Tier: idlegrid.TierSilver, Sort: idlegrid.NodesCheapest}, []string{n3.ID, n1.ID, n2.ID}},
				{idlegrid.NodeFilter{Tier: idlegrid.TierSilver, Sort: idlegrid.NodesCheapest, Limit: 1}, []string{n3.ID}},
				{idlegrid.NodeFilter{Tier: idlegrid.TierSilver, Sort: idlegrid.NodesCheapest, Offered: true, GPUModels: []string{"H100-80GB"}}, []string{n1.ID}},
				{idlegrid.NodeFilter{Regions: []string{"us-east"}}, []string{n3.ID}},
				{idlegrid.NodeFilter{Regions: []string{"eu-west", "ap-south"}}, []string{n1.ID, n2.ID}},
				{idlegrid.NodeFilter{GPUModels: []string{"A100-80GB"}}, []string{n3.ID}},
				{idlegrid.NodeFilter{GPUModels: []string{"H100-80GB"}}, []string{n1.ID, n2.ID}},
				{idlegrid.NodeFilter{GPUModels: []string{"L40S", "H100-80GB"}}, []string{n1.ID, n2.ID, n3.ID}},
				{idlegrid.NodeFilter{GPUModels: []string{"RTX4090"}}, nil},
				{idlegrid.NodeFilter{GPUModels: []string{"A100-80GB"}, Regions: []string{"eu-west"}}, nil},
				{idlegrid.NodeFilter{GPUModels: []string{"H100-80GB"}, Offered: true}, []string{n1.ID}},
				{idlegrid.NodeFilter{IDs: []string{n3.ID, n2.ID, "node_missing"}}, []string{n2.ID, n3.ID}},
				{idlegrid.NodeFilter{IDs: []string{n3.ID, n1.ID}, Tier: idlegrid.TierSilver, Sort: idlegrid.NodesCheapest}, []string{n3.ID, n1.ID}},
				{idlegrid.NodeFilter{IDs: []string{n1.ID, n2.ID}, GPUModels: []string{"H100-80GB"}, Offered: true}, []string{n1.ID}},
				{idlegrid.NodeFilter{IDs: []string{}}, nil},
				{idlegrid.NodeFilter{IDs: manyIDs(n2.ID, 70_000)}, []string{n2.ID}}, // more than a statement takes parameters
				{idlegrid.NodeFilter{After: n1.ID}, []string{n2.ID, n3.ID}},
				{idlegrid.NodeFilter{After: n3.ID}, nil},
				{idlegrid.NodeFilter{After: "node_missing"}, nil},
				{idlegrid.NodeFilter{Tier: idlegrid.TierSilver, Sort: idlegrid.NodesCheapest, After: n3.ID}, []string{n1.ID, n2.ID}},
				{idlegrid.NodeFilter{Tier: idlegrid.TierSilver, Sort: idlegrid.NodesCheapest, After: n1.ID, Limit: 1}, []string{n2.ID}},
				{idlegrid.NodeFilter{GPUModels: []string{"H100-80GB"}, After: n1.ID}, []string{n2.ID}},
				{idlegrid.NodeFilter{Name: "barn"}, []string{n2.ID, n3.ID}},
				{idlegrid.NodeFilter{Name: "barn", Offered: true}, []string{n3.ID}},
				{idlegrid.NodeFilter{Name: n1.Name}, []string{n1.ID}},
				{idlegrid.NodeFilter{Name: "Barn"}, nil}, // names are as their owners wrote them
			} {
				if got := search(tc.f); !slices.Equal(got, tc.want) {
					t.Errorf("remigrated to %d and up: nodes by %+v: %v, want %v", remigrated, tc.f, got, tc.want)
				}
			}
		}
		// The most reliable first: n3 ranks above the others once its
		// reputation says so (the others' reliability is as they joined).
		mustOK(t, db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: nodeReputation(n3, 0.99, 1, 2*time.Hour)}))
		if got := search(idlegrid.NodeFilter{Sort: idlegrid.NodesReliable}); len(got) != 3 || got[0] != n3.ID {
			t.Errorf("nodes, most reliable first: %v, want %s first", got, n3.ID)
		}
		// By trust level: n3 is at level 1, the others newcomers.
		for level, want := range map[int][]string{0: {n1.ID, n2.ID, n3.ID}, 1: {n3.ID}, 2: nil} {
			if got := search(idlegrid.NodeFilter{MinLevel: level}); !slices.Equal(got, want) {
				t.Errorf("nodes at level %d or above: %v, want %v", level, got, want)
			}
		}
		// Paged one node at a time, every order lists what it lists whole.
		for _, f := range []idlegrid.NodeFilter{{}, {Sort: idlegrid.NodesReliable}, {Tier: idlegrid.TierSilver, Sort: idlegrid.NodesCheapest}} {
			whole, paged := search(f), []string(nil)
			for page := f; ; {
				page.Limit = 1
				got := search(page)
				if len(got) == 0 || len(paged) > len(whole) {
					break
				}
				paged, page.After = append(paged, got...), got[0]
			}
			if !slices.Equal(paged, whole) {
				t.Errorf("nodes by %+v, a page of one at a time: %v, want %v", f, paged, whole)
			}
		}
		// An offer that changes its GPUs leaves no model behind.
		o.GPUs = o.GPUs[1:]
		mustOK(t, db.UpdateOffer(ctx, n3.ID, o, "v2", at(2*time.Hour)))
		if got := search(idlegrid.NodeFilter{GPUModels: []string{"A100-80GB"}}); len(got) != 0 {
			t.Errorf("nodes with an A100-80GB after n3 dropped it: %v", got)
		}
	})
	t.Run("ServesModels", func(t *testing.T) {
		serving := func() []string {
			t.Helper()
			got, err := db.ListNodes(ctx, idlegrid.NodeFilter{States: []idlegrid.NodeState{idlegrid.NodeOnline}, ServesModels: true})
			mustOK(t, err)
			return nodeIDs(got)
		}
		o := n3.Offer
		o.Models = []idlegrid.ModelOffer{{Name: "llama-3.1-8b", InputMicrosPerMTokens: 100_000, OutputMicrosPerMTokens: 200_000, MaxConcurrency: 4}}
		mustOK(t, db.UpdateOffer(ctx, n3.ID, o, "v2", at(2*time.Hour)))
		if got := serving(); !slices.Equal(got, []string{n3.ID}) {
			t.Fatalf("online nodes serving models: %v, want only %s", got, n3.ID)
		}
		// The migration that added the column finds the same nodes.
		mustOK(t, sqlstore.Remigrate(ctx, db, 17))
		if got := serving(); !slices.Equal(got, []string{n3.ID}) {
			t.Fatalf("after migrating again: online nodes serving models: %v, want only %s", got, n3.ID)
		}
		// An owner's schedule rewrites the offer, models and all.
		_, err := db.SetNodeSchedule(ctx, n3.ID, &idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}, at(2*time.Hour))
		mustOK(t, err)
		if got := serving(); !slices.Equal(got, []string{n3.ID}) {
			t.Fatalf("after a schedule: online nodes serving models: %v, want only %s", got, n3.ID)
		}
		o.Models = nil
		mustOK(t, db.UpdateOffer(ctx, n3.ID, o, "v2", at(2*time.Hour)))
		if got := serving(); len(got) != 0 {
			t.Fatalf("online nodes serving models: %v, want none once the offer lists none", got)
		}
	})
	t.Run("List", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			f    idlegrid.NodeFilter
			want []string
		}{
			{"all", idlegrid.NodeFilter{}, []string{n1.ID, n2.ID, n3.ID}},
			{"provider", idlegrid.NodeFilter{ProviderID: p1.ID}, []string{n1.ID, n2.ID}},
			{"online", idlegrid.NodeFilter{States: []idlegrid.NodeState{idlegrid.NodeOnline}}, []string{n1.ID, n3.ID}},
			{"provider and states", idlegrid.NodeFilter{ProviderID: p1.ID,
				States: []idlegrid.NodeState{idlegrid.NodeLost, idlegrid.NodeOffline}}, []string{n2.ID}},
			{"none", idlegrid.NodeFilter{ProviderID: "acct_missing"}, nil},
		} {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.ListNodes(ctx, tt.f)
				mustOK(t, err)
				if diff := cmp.Diff(tt.want, nodeIDs(got)); diff != "" {
					t.Errorf("ListNodes (-want +got):\n%s", diff)
				}
			})
		}
	})
}

// manyIDs is n node IDs, id among them: more than SQLite (32,766) or
// PostgreSQL (65,535) take parameters in one statement.
func manyIDs(id string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("node_%07d", i)
	}
	ids[n/2] = id
	return ids
}

func nodeIDs(ns []*idlegrid.Node) (ids []string) {
	for _, n := range ns {
		ids = append(ids, n.ID)
	}
	return ids
}

func testJobs(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r1 := mustAccount(t, db, idlegrid.RoleRenter)
	r2 := mustAccount(t, db, idlegrid.RoleRenter)
	j1 := newJob(r1.ID, 1, 1)
	j1.Deadline = ptr(at(48 * time.Hour))
	j1.Region, j1.Residency = "eu-west", "EU"
	mustOK(t, db.CreateJob(ctx, j1))
	j2 := newJob(r1.ID, 2, 4)
	j2.CreatedAt = at(time.Second)
	mustOK(t, db.CreateJob(ctx, j2))
	j3 := newJob(r2.ID, 1, 1)
	j3.CreatedAt = at(2 * time.Second)
	mustOK(t, db.CreateJob(ctx, j3))

	t.Run("Find", func(t *testing.T) {
		got, err := db.FindJob(ctx, j1.ID)
		mustOK(t, err)
		want := *j1
		want.State, want.UpdatedAt = idlegrid.JobQueued, t0
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("FindJob (-want +got):\n%s", diff)
		}
		_, err = db.FindJob(ctx, "job_missing")
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
	t.Run("Create", func(t *testing.T) {
		wantCode(t, db.CreateJob(ctx, newJob("acct_missing", 1, 1)), idlegrid.ENOTFOUND)
		dup := newJob(r1.ID, 1, 1)
		dup.ID = j1.ID
		wantCode(t, db.CreateJob(ctx, dup), idlegrid.ECONFLICT)
		noID := newJob(r1.ID, 1, 1)
		noID.ID = ""
		wantCode(t, db.CreateJob(ctx, noID), idlegrid.EINVALID)
	})
	t.Run("SetJobReason", func(t *testing.T) {
		mustOK(t, db.SetJobReason(ctx, j3.ID, "no node in eu-west", at(time.Minute)))
		got := mustJobState(t, db, j3.ID, idlegrid.JobQueued, "no node in eu-west")
		if !got.UpdatedAt.Equal(at(time.Minute)) {
			t.Errorf("updated_at = %v, want %v", got.UpdatedAt, at(time.Minute))
		}
		wantCode(t, db.SetJobReason(ctx, "job_missing", "x", t0), idlegrid.ENOTFOUND)
	})
	t.Run("List", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			f    idlegrid.JobFilter
			want []string
		}{
			{"all newest first", idlegrid.JobFilter{}, []string{j3.ID, j2.ID, j1.ID}},
			{"renter", idlegrid.JobFilter{RenterID: r1.ID}, []string{j2.ID, j1.ID}},
			{"limit", idlegrid.JobFilter{Limit: 2}, []string{j3.ID, j2.ID}},
			{"oldest first", idlegrid.JobFilter{OldestFirst: true, Limit: 2}, []string{j1.ID, j2.ID}},
			{"state", idlegrid.JobFilter{States: []idlegrid.JobState{idlegrid.JobQueued}, RenterID: r2.ID}, []string{j3.ID}},
			{"no match", idlegrid.JobFilter{States: []idlegrid.JobState{idlegrid.JobRunning}}, nil},
		} {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.ListJobs(ctx, tt.f)
				mustOK(t, err)
				var ids []string
				for _, j := range got {
					ids = append(ids, j.ID)
				}
				if diff := cmp.Diff(tt.want, ids); diff != "" {
					t.Errorf("ListJobs (-want +got):\n%s", diff)
				}
			})
		}
	})
	t.Run("Pages", func(t *testing.T) {
		r3 := mustAccount(t, db, idlegrid.RoleRenter)
		var all []*idlegrid.Job // five jobs, in pairs created at the same time
		for i := range 5 {
			j := newJob(r3.ID, 1, 1)
			j.CreatedAt = at(time.Duration(i/2) * time.Minute)
			mustOK(t, db.CreateJob(ctx, j))
			all = append(all, j)
		}
		slices.SortFunc(all, func(a, b *idlegrid.Job) int { // newest first, then the higher ID
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(b.ID, a.ID)
		})
		var paged []string
		f := idlegrid.JobFilter{RenterID: r3.ID, Limit: 2}
		for range len(all) {
			page, err := db.ListJobs(ctx, f)
			mustOK(t, err)
			if len(page) == 0 {
				break
			}
			for _, j := range page {
				paged = append(paged, j.ID)
			}
			f.Before = page[len(page)-1].ID
		}
		want := make([]string, len(all))
		for i, j := range all {
			want[i] = j.ID
		}
		if diff := cmp.Diff(want, paged); diff != "" {
			t.Errorf("pages of two (-want +got):\n%s", diff)
		}
		none, err := db.ListJobs(ctx, idlegrid.JobFilter{RenterID: r3.ID, Before: "job_missing"})
		mustOK(t, err)
		if len(none) != 0 {
			t.Errorf("before a job that is not there: %d jobs, want none", len(none))
		}
	})
}

func testCancelQueuedJob(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)

	queued := mustJob(t, db, r.ID, 1, 1)
	mustOK(t, db.CancelQueuedJob(ctx, queued.ID, "cancelled by renter", at(time.Hour)))
	got := mustJobState(t, db, queued.ID, idlegrid.JobCancelled, "cancelled by renter")
	if got.EndedAt == nil || !got.EndedAt.Equal(at(time.Hour)) {
		t.Errorf("ended_at = %v, want %v", got.EndedAt, at(time.Hour))
	}
	wantCode(t, db.CancelQueuedJob(ctx, queued.ID, "again", at(time.Hour)), idlegrid.ECONFLICT)
	mustOK(t, db.SetJobReason(ctx, queued.ID, "ignored", at(2*time.Hour)))
	mustJobState(t, db, queued.ID, idlegrid.JobCancelled, "cancelled by renter")

	running := mustJob(t, db, r.ID, 1, 1)
	mustPlace(t, db, placement(running, 0, lease(running, n, 0)))
	wantCode(t, db.CancelQueuedJob(ctx, running.ID, "too late", at(time.Hour)), idlegrid.ECONFLICT)
	mustJobState(t, db, running.ID, idlegrid.JobRunning, "running on 1 node(s)")
	wantCode(t, db.CancelQueuedJob(ctx, "job_missing", "x", t0), idlegrid.ENOTFOUND)
}

func testPlaceJob(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n1 := mustNode(t, db, p.ID, 2)
	n2 := mustNode(t, db, p.ID, 2)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	j := mustJob(t, db, r.ID, 2, 2)
	l1, l2 := lease(j, n1, 0, 1), lease(j, n2, 1, 0)
	pl := placement(j, 0, l1, l2)
	mustPlace(t, db, pl)

	got := mustJobState(t, db, j.ID, idlegrid.JobRunning, "running on 2 node(s)")
	if got.Attempts != 1 || got.StartedAt == nil || !got.StartedAt.Equal(pl.At) || !got.UpdatedAt.Equal(pl.At) {
		t.Errorf("job attempts %d, started %v, updated %v; want 1, %v, %v", got.Attempts, got.StartedAt, got.UpdatedAt, pl.At, pl.At)
	}
	for _, want := range []*idlegrid.Lease{l1, l2} {
		gotLease, err := db.FindLease(ctx, want.ID)
		mustOK(t, err)
		want.RenterID, want.ProviderID, want.State, want.CreatedAt = r.ID, p.ID, idlegrid.LeaseAssigned, pl.At
		if diff := cmp.Diff(want, gotLease); diff != "" {
			t.Errorf("FindLease (-want +got):\n%s", diff)
		}
		events, err := db.ListLeaseEvents(ctx, want.ID)
		mustOK(t, err)
		wantEvents := []*idlegrid.LeaseEvent{{LeaseID: want.ID, From: "", To: idlegrid.LeaseAssigned, Reason: "placed", At: pl.At}}
		if diff := cmp.Diff(wantEvents, events); diff != "" {
			t.Errorf("ListLeaseEvents (-want +got):\n%s", diff)
		}
	}
	b := mustBalance(t, db, r.ID)
	if want := (idlegrid.Balance{AccountID: r.ID, Available: 2 * idlegrid.MicrosPerUnit, Held: 8 * idlegrid.MicrosPerUnit}); *b != want {
		t.Errorf("Balance = %+v, want %+v", *b, want)
	}
	s, err := db.Summary(ctx)
	mustOK(t, err)
	if s.GPUsBusy != 4 || s.HeldMicros != 8*idlegrid.MicrosPerUnit {
		t.Errorf("Summary busy %d held %d, want 4, 8 units", s.GPUsBusy, s.HeldMicros)
	}
	_, err = db.FindLease(ctx, "lease_missing")
	wantCode(t, err, idlegrid.ENOTFOUND)
	_, err = db.ListLeaseEvents(ctx, "lease_missing")
	wantCode(t, err, idlegrid.ENOTFOUND)
}

// testPlaceJobConflicts checks that a placement that fails writes nothing:
// no lease, no claim, no hold, and the job stays queued.
func testPlaceJobConflicts(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	poor := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 2)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	mustTopUp(t, db, poor.ID, idlegrid.MicrosPerUnit)
	first := mustJob(t, db, r.ID, 1, 1)
	mustPlace(t, db, placement(first, 0, lease(first, n, 0)))

	for _, tt := range []struct {
		name    string
		renter  *idlegrid.Account
		place   func(j *idlegrid.Job) *idlegrid.Placement
		code    string
		message string
	}{
		{"GPU claimed", r, func(j *idlegrid.Job) *idlegrid.Placement {
			return placement(j, 0, lease(j, n, 1, 0))
		}, idlegrid.ECONFLICT, "already claimed"},
		{"GPU twice in one placement", r, func(j *idlegrid.Job) *idlegrid.Placement {
			return placement(j, 0, lease(j, n, 1), lease(j, n, 1))
		}, idlegrid.ECONFLICT, "already claimed"},
		{"stale attempt", r, func(j *idlegrid.Job) *idlegrid.Placement {
			return placement(j, 1, lease(j, n, 1))
		}, idlegrid.ECONFLICT, "moved on"},
		{"hold beyond balance", poor, func(j *idlegrid.Job) *idlegrid.Placement {
			return placement(j, 0, lease(j, n, 1))
		}, idlegrid.EPAYMENT, "renter balance too low: need $2.000000, have $1.000000; top up"},
		{"hold replayed", r, func(j *idlegrid.Job) *idlegrid.Placement {
			pl := placement(j, 0, lease(j, n, 1))
			// The hold's key was used before: the placement must not apply it again.
			_, err := db.PostTransfer(ctx, &idlegrid.Transfer{IdempotencyKey: pl.Transfers[0].IdempotencyKey,
				Kind: idlegrid.TransferTopUp, CreatedAt: t0, Entries: topUp(r.ID, 1).Entries})
			mustOK(t, err)
			return pl
		}, idlegrid.ECONFLICT, "already applied"},
		{"unknown node", r, func(j *idlegrid.Job) *idlegrid.Placement {
			l := lease(j, n, 1)
			l.NodeID = "node_missing"
			return placement(j, 0, l)
		}, idlegrid.ENOTFOUND, "node"},
		{"no leases", r, func(j *idlegrid.Job) *idlegrid.Placement {
			return placement(j, 0)
		}, idlegrid.EINVALID, "lease"},
		// A placement the coordinator got wrong is refused whole.
		{"a lease without an ID", r, func(j *idlegrid.Job) *idlegrid.Placement {
			l := lease(j, n, 1)
			pl := placement(j, 0, l)
			l.ID = ""
			return pl
		}, idlegrid.EINVALID, "lease.id: required"},
		{"a lease without a node", r, func(j *idlegrid.Job) *idlegrid.Placement {
			l := lease(j, n, 1)
			l.NodeID = ""
			return placement(j, 0, l)
		}, idlegrid.EINVALID, "lease.node_id: required"},
		{"a lease without GPUs", r, func(j *idlegrid.Job) *idlegrid.Placement {
			return placement(j, 0, lease(j, n))
		}, idlegrid.EINVALID, "lease.gpu_uuids: a lease needs at least one GPU"},
		{"another job's lease", r, func(j *idlegrid.Job) *idlegrid.Placement {
			l := lease(j, n, 1)
			l.JobID = first.ID
			return placement(j, 0, l)
		}, idlegrid.EINVALID, "lease.job_id: is job"},
		{"another renter's lease", r, func(j *idlegrid.Job) *idlegrid.Placement {
			l := lease(j, n, 1)
			l.RenterID = poor.ID
			return placement(j, 0, l)
		}, idlegrid.EINVALID, "lease.renter_id: is acct"},
		{"a lease of the wrong attempt", r, func(j *idlegrid.Job) *idlegrid.Placement {
			l := lease(j, n, 1)
			pl := placement(j, 0, l)
			l.Attempt = 3
			return pl
		}, idlegrid.EINVALID, "lease.attempt: must be the placement's attempt + 1 (1), got 3"},
		{"a lease placed ended", r, func(j *idlegrid.Job) *idlegrid.Placement {
			l := lease(j, n, 1)
			l.State = idlegrid.LeaseSucceeded
			return placement(j, 0, l)
		}, idlegrid.EINVALID, "lease.state: a new lease cannot be succeeded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := mustJob(t, db, tt.renter.ID, 1, 1)
			pl := tt.place(j)
			before := mustBalance(t, db, tt.renter.ID)
			err := db.PlaceJob(ctx, pl)
			wantCode(t, err, tt.code)
			if !strings.Contains(idlegrid.ErrorMessage(err), tt.message) {
				t.Errorf("message %q does not say %q", idlegrid.ErrorMessage(err), tt.message)
			}
			// Only a job that moved on says so: the scheduler rebuilds its
			// engine for any other conflict.
			if movedOn := tt.message == "moved on"; idlegrid.JobMovedOn(err) != movedOn {
				t.Errorf("JobMovedOn(%v) = %v, want %v", err, !movedOn, movedOn)
			}
			checkLedger(t, db)
			mustJobState(t, db, j.ID, idlegrid.JobQueued, "")
			if got, _ := db.FindJob(ctx, j.ID); got.Attempts != 0 || got.StartedAt != nil {
				t.Errorf("job attempts %d started %v, want 0, nil", got.Attempts, got.StartedAt)
			}
			leases, err := db.ListLeases(ctx, idlegrid.LeaseFilter{JobID: j.ID})
			mustOK(t, err)
			if len(leases) != 0 {
				t.Errorf("%d leases written, want none", len(leases))
			}
			if after := mustBalance(t, db, tt.renter.ID); *after != *before {
				t.Errorf("balance %+v, want unchanged %+v", *after, *before)
			}
			for _, l := range pl.Leases {
				if l.ID == "" {
					continue // an empty filter lists every transfer; the balance above covers it
				}
				if ts, _ := db.ListTransfers(ctx, idlegrid.TransferFilter{LeaseID: l.ID}); len(ts) != 0 {
					t.Errorf("%d holds written for %s, want none", len(ts), l.ID)
				}
			}
			s, err := db.Summary(ctx)
			mustOK(t, err)
			if s.GPUsBusy != 1 {
				t.Errorf("GPUs busy = %d, want 1", s.GPUsBusy)
			}
		})
	}
}

func testTransitionLease(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	j := mustJob(t, db, r.ID, 1, 1)
	l := lease(j, n, 0)
	mustPlace(t, db, placement(j, 0, l))
	start(t, db, l)

	got, err := db.FindLease(ctx, l.ID)
	mustOK(t, err)
	if got.State != idlegrid.LeaseRunning || got.StartedAt == nil || !got.StartedAt.Equal(at(2*time.Minute)) {
		t.Fatalf("lease %s started %v, want running at %v", got.State, got.StartedAt, at(2*time.Minute))
	}
	mustJobState(t, db, j.ID, idlegrid.JobRunning, "running on 1 node(s)")

	charge := idlegrid.CostOf(price, 1800) // ran half its hour
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseSucceeded, Reason: "exited 0", ExitCode: ptr(0), ChargedMicros: charge, At: at(32 * time.Minute)},
		settle(l, charge))

	got, err = db.FindLease(ctx, l.ID)
	mustOK(t, err)
	want := *l
	want.State, want.Reason, want.ExitCode, want.ChargedMicros = idlegrid.LeaseSucceeded, "exited 0", ptr(0), charge
	want.StartedAt, want.EndedAt = ptr(at(2*time.Minute)), ptr(at(32*time.Minute))
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("lease (-want +got):\n%s", diff)
	}
	events, err := db.ListLeaseEvents(ctx, l.ID)
	mustOK(t, err)
	wantEvents := []*idlegrid.LeaseEvent{
		{LeaseID: l.ID, From: "", To: idlegrid.LeaseAssigned, Reason: "placed", At: at(time.Minute)},
		{LeaseID: l.ID, From: idlegrid.LeaseAssigned, To: idlegrid.LeaseRunning, Reason: "started", At: at(2 * time.Minute)},
		{LeaseID: l.ID, From: idlegrid.LeaseRunning, To: idlegrid.LeaseSucceeded, Reason: "exited 0", At: at(32 * time.Minute)},
	}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	job := mustJobState(t, db, j.ID, idlegrid.JobSucceeded, "all leases completed")
	if job.ChargedMicros != charge || job.EndedAt == nil || !job.EndedAt.Equal(at(32*time.Minute)) {
		t.Errorf("job charged %d ended %v, want %d, %v", job.ChargedMicros, job.EndedAt, charge, at(32*time.Minute))
	}
	node, err := db.FindNode(ctx, n.ID)
	mustOK(t, err)
	if node.LeasesCompleted != 1 || node.LeasesFailed != 0 || node.Reliability != idlegrid.ReliabilityOf(1, 0) {
		t.Errorf("node record %d/%d reliability %v, want 1/0 %v", node.LeasesCompleted, node.LeasesFailed,
			node.Reliability, idlegrid.ReliabilityOf(1, 0))
	}
	if b, want := *mustBalance(t, db, r.ID), (idlegrid.Balance{AccountID: r.ID,
		Available: 10*idlegrid.MicrosPerUnit - charge, Spent: charge}); b != want {
		t.Errorf("renter balance %+v, want %+v", b, want)
	}
	if b, want := *mustBalance(t, db, p.ID), (idlegrid.Balance{AccountID: p.ID, Pending: charge - charge/10}); b != want {
		t.Errorf("provider balance %+v, want %+v", b, want)
	}
	// The GPU is free again.
	j2 := mustJob(t, db, r.ID, 1, 1)
	mustPlace(t, db, placement(j2, 0, lease(j2, n, 0)))
}

// testLeavingHeartbeats: the offline nodes that still hold a live lease,
// assigned or running, are listed with their last heartbeats; an online
// node, an offline one with none, and one whose lease ended are not.
func testLeavingHeartbeats(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	running, assigned, online, idle := mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1)
	var leases []*idlegrid.Lease
	for _, n := range []*idlegrid.Node{running, assigned, online} {
		j := mustJob(t, db, r.ID, 1, 1)
		l := lease(j, n, 0)
		mustPlace(t, db, placement(j, 0, l))
		leases = append(leases, l)
	}
	start(t, db, leases[0])
	_, err := db.Heartbeat(ctx, running.ID, at(3*time.Minute))
	mustOK(t, err)
	for _, n := range []*idlegrid.Node{running, assigned, idle} {
		mustOK(t, db.SetNodeState(ctx, n.ID, idlegrid.NodeOffline, at(4*time.Minute)))
	}
	got, err := db.LeavingHeartbeats(ctx)
	mustOK(t, err)
	want := map[string]time.Time{running.ID: at(3 * time.Minute), assigned.ID: t0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LeavingHeartbeats (-want +got):\n%s", diff)
	}
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: leases[0].ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider, Reason: "the node agent shut down", At: at(5 * time.Minute)})
	got, err = db.LeavingHeartbeats(ctx)
	mustOK(t, err)
	if diff := cmp.Diff(map[string]time.Time{assigned.ID: t0}, got); diff != "" {
		t.Errorf("LeavingHeartbeats once the running lease ended (-want +got):\n%s", diff)
	}
}

// testTransitionOutcomes checks what each way of ending does to the job and
// the node's record.
func testTransitionOutcomes(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	for _, tt := range []struct {
		to                  idlegrid.LeaseState
		fault               idlegrid.Fault
		job                 idlegrid.JobState
		reason              string
		completed, failed   int64
		wantEnded, attempts bool
	}{
		{idlegrid.LeaseSucceeded, "", idlegrid.JobSucceeded, "all leases completed", 1, 0, true, false},
		{idlegrid.LeaseFailed, idlegrid.FaultWorkload, idlegrid.JobFailed, "exit 3", 1, 0, true, false},
		{idlegrid.LeaseFailed, idlegrid.FaultProvider, idlegrid.JobQueued, "requeued: exit 3", 0, 1, false, true},
		{idlegrid.LeaseLost, "", idlegrid.JobQueued, "requeued: exit 3", 0, 1, false, true},
		{idlegrid.LeaseCancelled, "", idlegrid.JobCancelled, "exit 3", 0, 0, true, false},
	} {
		t.Run(string(tt.to)+"/"+string(tt.fault), func(t *testing.T) {
			n := mustNode(t, db, p.ID, 1)
			j := mustJob(t, db, r.ID, 1, 1)
			l := lease(j, n, 0)
			mustPlace(t, db, placement(j, 0, l))
			start(t, db, l)
			charge := idlegrid.Micros(0)
			if tt.fault != idlegrid.FaultProvider && tt.to != idlegrid.LeaseLost {
				charge = 1000
			}
			mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID,
				From: []idlegrid.LeaseState{idlegrid.LeaseAssigned, idlegrid.LeaseRunning}, To: tt.to,
				Reason: "exit 3", Fault: tt.fault, ChargedMicros: charge, At: at(time.Hour)}, settle(l, charge))

			job := mustJobState(t, db, j.ID, tt.job, tt.reason)
			if (job.EndedAt != nil) != tt.wantEnded {
				t.Errorf("job ended_at = %v, want set: %v", job.EndedAt, tt.wantEnded)
			}
			if job.Attempts != 1 || job.ChargedMicros != charge {
				t.Errorf("job attempts %d charged %d, want 1, %d", job.Attempts, job.ChargedMicros, charge)
			}
			node, err := db.FindNode(ctx, n.ID)
			mustOK(t, err)
			if node.LeasesCompleted != tt.completed || node.LeasesFailed != tt.failed ||
				node.Reliability != idlegrid.ReliabilityOf(tt.completed, tt.failed) {
				t.Errorf("node record %d/%d (%v), want %d/%d", node.LeasesCompleted, node.LeasesFailed,
					node.Reliability, tt.completed, tt.failed)
			}
			if tt.attempts { // a requeued job can be placed again, at its next attempt
				l2 := lease(j, n, 0)
				wantCode(t, db.PlaceJob(ctx, placement(j, 0, l2)), idlegrid.ECONFLICT)
				mustPlace(t, db, placement(j, 1, l2))
				if got, _ := db.FindLease(ctx, l2.ID); got.Attempt != 2 {
					t.Errorf("second lease attempt = %d, want 2", got.Attempt)
				}
			}
		})
	}
}

// testTransitionMultiNode checks that a job runs while any of its leases
// lives, and that a lease of an earlier attempt does not move it.
func testTransitionMultiNode(t *testing.T, db *sqlstore.DB) {
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n1, n2 := mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	j := mustJob(t, db, r.ID, 2, 1)
	l1, l2 := lease(j, n1, 0), lease(j, n2, 0)
	mustPlace(t, db, placement(j, 0, l1, l2))
	start(t, db, l1)
	start(t, db, l2)

	end := func(l *idlegrid.Lease, to idlegrid.LeaseState, when time.Duration) {
		t.Helper()
		mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
			To: to, Reason: string(to), ChargedMicros: 500, At: at(when)}, settle(l, 500))
	}
	end(l1, idlegrid.LeaseSucceeded, time.Hour)
	mustJobState(t, db, j.ID, idlegrid.JobRunning, "running on 2 node(s)")
	end(l2, idlegrid.LeaseSucceeded, 2*time.Hour)
	job := mustJobState(t, db, j.ID, idlegrid.JobSucceeded, "all leases completed")
	if job.ChargedMicros != 1000 || !job.EndedAt.Equal(at(2*time.Hour)) {
		t.Errorf("job charged %d ended %v, want 1000 at %v", job.ChargedMicros, job.EndedAt, at(2*time.Hour))
	}
	if b := mustBalance(t, db, r.ID); b.Spent != 1000 || b.Held != 0 {
		t.Errorf("renter spent %d held %d, want 1000, 0", b.Spent, b.Held)
	}

	// Requeue: both leases of the first attempt are lost; the job is placed
	// again, and only the second attempt's leases decide how it ends.
	t.Run("Requeue", func(t *testing.T) {
		j := mustJob(t, db, r.ID, 2, 1)
		old1, old2 := lease(j, n1, 0), lease(j, n2, 0)
		mustPlace(t, db, placement(j, 0, old1, old2))
		lose := func(l *idlegrid.Lease) {
			t.Helper()
			mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
				To: idlegrid.LeaseLost, Reason: "node went silent", At: at(3 * time.Hour)}, settle(l, 0))
		}
		lose(old1)
		mustJobState(t, db, j.ID, idlegrid.JobRunning, "running on 2 node(s)")
		lose(old2)
		mustJobState(t, db, j.ID, idlegrid.JobQueued, "requeued: node went silent")

		new1, new2 := lease(j, n1, 0), lease(j, n2, 0)
		mustPlace(t, db, placement(j, 1, new1, new2))
		start(t, db, new1)
		start(t, db, new2)
		end(new1, idlegrid.LeaseSucceeded, 4*time.Hour)
		end(new2, idlegrid.LeaseSucceeded, 4*time.Hour)
		job := mustJobState(t, db, j.ID, idlegrid.JobSucceeded, "all leases completed")
		if job.Attempts != 2 || job.ChargedMicros != 1000 {
			t.Errorf("job attempts %d charged %d, want 2, 1000", job.Attempts, job.ChargedMicros)
		}
	})
}

func testTransitionErrors(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	j := mustJob(t, db, r.ID, 1, 1)
	l := lease(j, n, 0)
	mustPlace(t, db, placement(j, 0, l))

	succeed := func(charge idlegrid.Micros) *idlegrid.LeaseTransition {
		return &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
			To: idlegrid.LeaseSucceeded, Reason: "exited 0", ChargedMicros: charge, At: at(time.Hour)}
	}
	t.Run("NotInFrom", func(t *testing.T) {
		err := db.TransitionLease(ctx, succeed(0), nil)
		wantCode(t, err, idlegrid.ECONFLICT)
		if err == nil || !strings.Contains(err.Error(), "is assigned, not running") {
			t.Errorf("TransitionLease of an assigned lease from running: %v; want it to say so", err)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		tr := succeed(0)
		tr.LeaseID = "lease_missing"
		wantCode(t, db.TransitionLease(ctx, tr, nil), idlegrid.ENOTFOUND)
	})
	t.Run("Invalid", func(t *testing.T) {
		tr := succeed(0)
		tr.From = nil
		wantCode(t, db.TransitionLease(ctx, tr, nil), idlegrid.EINVALID)
		tr = succeed(0)
		tr.To = "paused"
		wantCode(t, db.TransitionLease(ctx, tr, nil), idlegrid.EINVALID)
		for field, edit := range map[string]func(*idlegrid.LeaseTransition){
			"transition.lease_id":       func(tr *idlegrid.LeaseTransition) { tr.LeaseID = "" },
			"transition.at":             func(tr *idlegrid.LeaseTransition) { tr.At = time.Time{} },
			"transition.charged_micros": func(tr *idlegrid.LeaseTransition) { tr.ChargedMicros = -1 },
		} {
			tr := succeed(0)
			tr.From = append(tr.From, idlegrid.LeaseAssigned) // the lease's state: only the field is wrong
			edit(tr)
			wantField(t, db.TransitionLease(ctx, tr, nil), field)
		}
		if got, err := db.FindLease(ctx, l.ID); err != nil {
			t.Fatal(err)
		} else if got.State != idlegrid.LeaseAssigned {
			t.Errorf("the lease after the refused transitions is %s, want still assigned", got.State)
		}
	})
	start(t, db, l)
	// A settle that overdraws the hold fails, and takes the whole transition with it.
	t.Run("Overdraw", func(t *testing.T) {
		bad := settle(l, 1000)
		bad.Entries[0].Amount, bad.Entries[3].Amount = -l.HoldMicros-1, l.HoldMicros+1-1000
		err := db.TransitionLease(ctx, succeed(1000), []*idlegrid.Transfer{bad})
		wantCode(t, err, idlegrid.EPAYMENT)
		if !strings.Contains(idlegrid.ErrorMessage(err), string(idlegrid.RenterHeld(r.ID))) {
			t.Errorf("message %q does not name the account", idlegrid.ErrorMessage(err))
		}
		checkLedger(t, db)
		got, err := db.FindLease(ctx, l.ID)
		mustOK(t, err)
		if got.State != idlegrid.LeaseRunning || got.ChargedMicros != 0 || got.EndedAt != nil {
			t.Errorf("lease %s charged %d ended %v after a failed transition", got.State, got.ChargedMicros, got.EndedAt)
		}
		if events, _ := db.ListLeaseEvents(ctx, l.ID); len(events) != 2 {
			t.Errorf("%d events, want 2", len(events))
		}
		mustJobState(t, db, j.ID, idlegrid.JobRunning, "")
		if s, _ := db.Summary(ctx); s.GPUsBusy != 1 {
			t.Errorf("GPUs busy %d, want 1: the claim must survive", s.GPUsBusy)
		}
	})
	t.Run("TransferReplayed", func(t *testing.T) {
		x := settle(l, 1000)
		_, err := db.PostTransfer(ctx, &idlegrid.Transfer{IdempotencyKey: x.IdempotencyKey, Kind: idlegrid.TransferTopUp,
			CreatedAt: t0, Entries: topUp(r.ID, 5).Entries})
		mustOK(t, err)
		wantCode(t, db.TransitionLease(ctx, succeed(1000), []*idlegrid.Transfer{x}), idlegrid.ECONFLICT)
		checkLedger(t, db)
		if got, _ := db.FindLease(ctx, l.ID); got.State != idlegrid.LeaseRunning {
			t.Errorf("lease %s, want running", got.State)
		}
	})
}

func testRequestLeaseStop(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	j := mustJob(t, db, r.ID, 1, 1)
	l := lease(j, n, 0)
	mustPlace(t, db, placement(j, 0, l))

	stop := func(reason string, when time.Duration, want string, wantAt time.Time) {
		t.Helper()
		mustOK(t, db.RequestLeaseStop(ctx, l.ID, reason, at(when)))
		got, err := db.FindLease(ctx, l.ID)
		mustOK(t, err)
		if got.StopRequested != want || got.NoticeAt == nil || !got.NoticeAt.Equal(wantAt) {
			t.Errorf("after %q: stop_requested = %q since %v, want %q since %v", reason, got.StopRequested, got.NoticeAt, want, wantAt)
		}
	}
	// A notice stands against a later notice; a cancel replaces it, and
	// the notice's time stands; a cancel stands against anything.
	stop(idlegrid.NoticeStopPrefix+"preempted", 30*time.Minute, idlegrid.NoticeStopPrefix+"preempted", at(30*time.Minute))
	stop(idlegrid.NoticeStopPrefix+"window ends", 40*time.Minute, idlegrid.NoticeStopPrefix+"preempted", at(30*time.Minute))
	stop("cancelled by renter", time.Hour, "cancelled by renter", at(30*time.Minute))
	stop("time limit", 2*time.Hour, "cancelled by renter", at(30*time.Minute))
	stop(idlegrid.NoticeStopPrefix+"drained", 2*time.Hour, "cancelled by renter", at(30*time.Minute))
	wantCode(t, db.RequestLeaseStop(ctx, "lease_missing", "x", t0), idlegrid.ENOTFOUND)
	wantCode(t, db.RequestLeaseStop(ctx, l.ID, "", t0), idlegrid.EINVALID)
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
		To: idlegrid.LeaseCancelled, Reason: "cancelled by renter", At: at(time.Hour)}, settle(l, 0))
	wantCode(t, db.RequestLeaseStop(ctx, l.ID, "again", at(time.Hour)), idlegrid.ECONFLICT)
	mustJobState(t, db, j.ID, idlegrid.JobCancelled, "cancelled by renter")
}

func testSetLeaseProgress(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	j := mustJob(t, db, r.ID, 1, 1)
	l := lease(j, n, 0)
	mustPlace(t, db, placement(j, 0, l))

	report := func(progress float64, checkpoint *time.Time, now time.Time) (bool, error) {
		return db.SetLeaseProgress(ctx, idlegrid.LeaseProgress{LeaseID: l.ID, Progress: progress, CheckpointAt: checkpoint}, now)
	}
	_, err := report(0.5, nil, t0)
	wantCode(t, err, idlegrid.ECONFLICT) // assigned
	start(t, db, l)                      // at 2 minutes
	if ck, err := report(0.25, nil, at(time.Hour)); err != nil || ck {
		t.Fatalf("a report without a checkpoint: checkpointed %v, %v", ck, err)
	}
	got, err := db.FindLease(ctx, l.ID)
	mustOK(t, err)
	if got.Progress != 0.25 || got.CheckpointAt != nil {
		t.Errorf("progress = %v, checkpoint %v; want 0.25, none", got.Progress, got.CheckpointAt)
	}

	// A checkpoint is kept to the microsecond, moves only forward, and one
	// a little ahead of the server's clock counts as now.
	// The same checkpoint read again through another heartbeat's transit
	// (the node says its age, the server takes it from its own clock)
	// comes a little later: within a second it is no news.
	ck1, ck2, ahead := at(30*time.Minute+time.Nanosecond), at(40*time.Minute), at(time.Hour+30*time.Second)
	ck1Later, ck2Later := ck1.Add(300*time.Millisecond), ck2.Add(time.Second+time.Microsecond)
	for _, tt := range []struct {
		checkpoint *time.Time
		wantNews   bool
		want       time.Time
	}{
		{&ck1, true, ck1.Truncate(time.Microsecond)},
		{&ck1, false, ck1.Truncate(time.Microsecond)},      // the same again
		{&ck1Later, false, ck1.Truncate(time.Microsecond)}, // the same, read a little later
		{&ck2, true, ck2},
		{&ck2Later, true, ck2Later},
		{&ck2, false, ck2Later}, // an older one
		{&ck1, false, ck2Later}, // an older one
		{nil, false, ck2Later},  // none
		{&ahead, true, at(time.Hour)},
	} {
		news, err := report(0.5, tt.checkpoint, at(time.Hour))
		mustOK(t, err)
		got, err := db.FindLease(ctx, l.ID)
		mustOK(t, err)
		if news != tt.wantNews || got.CheckpointAt == nil || !got.CheckpointAt.Equal(tt.want) {
			t.Errorf("report of %v: news %v, checkpoint %v; want %v, %v", tt.checkpoint, news, got.CheckpointAt, tt.wantNews, tt.want)
		}
	}
	farAhead, beforeStart := at(time.Hour+2*time.Minute), at(time.Minute)
	_, err = report(0.5, &farAhead, at(time.Hour))
	wantField(t, err, "lease.checkpoint_at")
	_, err = report(0.5, &beforeStart, at(time.Hour))
	wantField(t, err, "lease.checkpoint_at")
	_, err = report(1.5, nil, t0)
	wantCode(t, err, idlegrid.EINVALID)
	_, err = db.SetLeaseProgress(ctx, idlegrid.LeaseProgress{LeaseID: "lease_missing", Progress: 0.5}, t0)
	wantCode(t, err, idlegrid.ENOTFOUND)
}

func testListLeases(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r1, r2 := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleRenter)
	p1, p2 := mustAccount(t, db, idlegrid.RoleProvider), mustAccount(t, db, idlegrid.RoleProvider)
	n1, n2 := mustNode(t, db, p1.ID, 2), mustNode(t, db, p2.ID, 2)
	mustTopUp(t, db, r1.ID, 100*idlegrid.MicrosPerUnit)
	mustTopUp(t, db, r2.ID, 100*idlegrid.MicrosPerUnit)

	ja, jb := mustJob(t, db, r1.ID, 2, 1), mustJob(t, db, r2.ID, 1, 1)
	a1, a2 := lease(ja, n1, 0), lease(ja, n2, 0)
	mustPlace(t, db, placement(ja, 0, a1, a2))
	b1 := lease(jb, n1, 1)
	pb := placement(jb, 0, b1)
	pb.At = at(time.Hour) // newer
	mustPlace(t, db, pb)
	start(t, db, a2)

	for _, tt := range []struct {
		name string
		f    idlegrid.LeaseFilter
		want []string
	}{
		{"job", idlegrid.LeaseFilter{JobID: ja.ID}, []string{a2.ID, a1.ID}},
		{"node newest first", idlegrid.LeaseFilter{NodeID: n1.ID}, []string{b1.ID, a1.ID}},
		{"provider", idlegrid.LeaseFilter{ProviderID: p2.ID}, []string{a2.ID}},
		{"renter", idlegrid.LeaseFilter{RenterID: r2.ID}, []string{b1.ID}},
		{"states", idlegrid.LeaseFilter{States: []idlegrid.LeaseState{idlegrid.LeaseRunning}}, []string{a2.ID}},
		{"limit", idlegrid.LeaseFilter{NodeID: n1.ID, Limit: 1}, []string{b1.ID}},
		{"none", idlegrid.LeaseFilter{JobID: ja.ID, RenterID: r2.ID}, nil},
		{"the page after the newest", idlegrid.LeaseFilter{NodeID: n1.ID, Before: b1.ID}, []string{a1.ID}},
		{"the page after the last", idlegrid.LeaseFilter{NodeID: n1.ID, Before: a1.ID}, nil},
		{"after no lease", idlegrid.LeaseFilter{Before: "lease_missing"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.ListLeases(ctx, tt.f)
			mustOK(t, err)
			var ids []string
			for _, l := range got {
				ids = append(ids, l.ID)
			}
			// a1 and a2 were placed at the same instant: compare them as a set.
			opt := cmpopts.SortSlices(func(x, y string) bool { return x < y })
			if tt.name != "job" {
				opt = nil
			}
			if diff := cmp.Diff(tt.want, ids, opt); diff != "" {
				t.Errorf("ListLeases (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("pages through a tie", func(t *testing.T) { // a1 and a2, placed at the same instant, by ID
		first, err := db.ListLeases(ctx, idlegrid.LeaseFilter{JobID: ja.ID, Limit: 1})
		mustOK(t, err)
		second, err := db.ListLeases(ctx, idlegrid.LeaseFilter{JobID: ja.ID, Limit: 1, Before: first[0].ID})
		mustOK(t, err)
		hi, lo := max(a1.ID, a2.ID), min(a1.ID, a2.ID)
		if len(first) != 1 || len(second) != 1 || first[0].ID != hi || second[0].ID != lo {
			t.Errorf("pages of one: %v then %v, want %s then %s", first, second, hi, lo)
		}
	})
}

func testLogs(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	j := mustJob(t, db, r.ID, 1, 1)
	l := lease(j, n, 0)
	mustPlace(t, db, placement(j, 0, l))

	first := []idlegrid.LogLine{
		{At: at(time.Second), Stream: "stdout", Text: "epoch 1"},
		{At: at(2 * time.Second), Stream: "stderr", Text: "warning: ünïcode"},
	}
	mustOK(t, db.AppendLogs(ctx, l.ID, first))
	second := []idlegrid.LogLine{{At: at(3 * time.Second), Stream: "stdout", Text: "epoch 2"}}
	mustOK(t, db.AppendLogs(ctx, l.ID, second))
	mustOK(t, db.AppendLogs(ctx, l.ID, nil))
	want := []idlegrid.LogLine{
		{Seq: 1, At: at(time.Second), Stream: "stdout", Text: "epoch 1"},
		{Seq: 2, At: at(2 * time.Second), Stream: "stderr", Text: "warning: ünïcode"},
		{Seq: 3, At: at(3 * time.Second), Stream: "stdout", Text: "epoch 2"},
	}
	if diff := cmp.Diff(want, append(first, second...)); diff != "" {
		t.Errorf("AppendLogs did not number the lines (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		after int64
		limit int
		tail  bool
		want  []idlegrid.LogLine
	}{
		{0, 0, false, want},
		{1, 0, false, want[1:]},
		{0, 2, false, want[:2]},
		{3, 10, false, nil},
		{0, 2, true, want[1:]},
		{0, 10, true, want},
		{2, 2, true, want[2:]},
	} {
		got, err := db.ListLogs(ctx, idlegrid.LogFilter{LeaseID: l.ID, After: tt.after, Limit: tt.limit, Tail: tt.tail})
		mustOK(t, err)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ListLogs(after %d, limit %d, tail %v) (-want +got):\n%s", tt.after, tt.limit, tt.tail, diff)
		}
	}
	t.Run("only the latest are kept", func(t *testing.T) {
		sqlstore.KeepLogLines(db, 4)
		defer sqlstore.KeepLogLines(db, 0)
		more := []idlegrid.LogLine{{At: at(4 * time.Second), Stream: "stdout", Text: "epoch 3"}, {At: at(5 * time.Second), Stream: "stdout", Text: "epoch 4"}}
		mustOK(t, db.AppendLogs(ctx, l.ID, more))
		got, err := db.ListLogs(ctx, idlegrid.LogFilter{LeaseID: l.ID})
		mustOK(t, err)
		var seqs []int64
		for _, g := range got {
			seqs = append(seqs, g.Seq)
		}
		if !slices.Equal(seqs, []int64{2, 3, 4, 5}) {
			t.Errorf("lines kept = %v, want the latest four, 2–5, numbered on", seqs)
		}
	})
	wantCode(t, db.AppendLogs(ctx, "lease_missing", want), idlegrid.ENOTFOUND)
	_, err := db.ListLogs(ctx, idlegrid.LogFilter{LeaseID: "lease_missing", Limit: 10})
	wantCode(t, err, idlegrid.ENOTFOUND)
}

func testPostTransfer(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	x := topUp(r.ID, 5*idlegrid.MicrosPerUnit)
	x.Memo = "card 4242"
	got, err := db.PostTransfer(ctx, x)
	mustOK(t, err)
	checkLedger(t, db)
	if got.ID == "" {
		t.Fatal("transfer got no ID")
	}

	t.Run("Replay", func(t *testing.T) {
		again := topUp(r.ID, 5*idlegrid.MicrosPerUnit)
		again.IdempotencyKey, again.Memo = x.IdempotencyKey, "retried"
		stored, err := db.PostTransfer(ctx, again)
		mustOK(t, err)
		if diff := cmp.Diff(x, stored); diff != "" {
			t.Errorf("replay returned (-want +got):\n%s", diff)
		}
		if b := mustBalance(t, db, r.ID); b.Available != 5*idlegrid.MicrosPerUnit {
			t.Errorf("available %v after a replay, want $5", b.Available)
		}
		checkLedger(t, db)
	})
	t.Run("ReplayDifferent", func(t *testing.T) {
		other := topUp(r.ID, 6*idlegrid.MicrosPerUnit)
		other.IdempotencyKey = x.IdempotencyKey
		_, err := db.PostTransfer(ctx, other)
		wantCode(t, err, idlegrid.ECONFLICT)
		checkLedger(t, db)
	})
	t.Run("Overdraw", func(t *testing.T) {
		_, err := db.PostTransfer(ctx, &idlegrid.Transfer{IdempotencyKey: id("spend"), Kind: idlegrid.TransferHold, CreatedAt: t0,
			Entries: []idlegrid.Entry{
				{Account: idlegrid.RenterAvailable(r.ID), Amount: -6 * idlegrid.MicrosPerUnit},
				{Account: idlegrid.RenterHeld(r.ID), Amount: 6 * idlegrid.MicrosPerUnit},
			}})
		wantCode(t, err, idlegrid.EPAYMENT)
		if want := "renter balance too low: need $6.000000, have $5.000000; top up"; !strings.Contains(idlegrid.ErrorMessage(err), want) {
			t.Errorf("message %q, want %q", idlegrid.ErrorMessage(err), want)
		}
		if b := mustBalance(t, db, r.ID); b.Available != 5*idlegrid.MicrosPerUnit || b.Held != 0 {
			t.Errorf("balance %+v after a refused transfer", b)
		}
		checkLedger(t, db)
	})
	t.Run("NetPerAccount", func(t *testing.T) {
		// Debit and credit of one account in one transfer is judged on the net.
		_, err := db.PostTransfer(ctx, &idlegrid.Transfer{IdempotencyKey: id("net"), Kind: idlegrid.TransferHold, CreatedAt: t0,
			Entries: []idlegrid.Entry{
				{Account: idlegrid.RenterHeld(r.ID), Amount: -1},
				{Account: idlegrid.RenterAvailable(r.ID), Amount: -1},
				{Account: idlegrid.RenterHeld(r.ID), Amount: 2},
			}})
		mustOK(t, err)
		checkLedger(t, db)
	})
	t.Run("Invalid", func(t *testing.T) {
		for name, x := range map[string]*idlegrid.Transfer{
			"unbalanced": {IdempotencyKey: id("k"), CreatedAt: t0, Entries: []idlegrid.Entry{
				{Account: idlegrid.WorldAccount, Amount: -1}, {Account: idlegrid.RenterAvailable(r.ID), Amount: 2}}},
			"no key": {CreatedAt: t0, Entries: topUp(r.ID, 1).Entries},
			"one entry": {IdempotencyKey: id("k"), CreatedAt: t0, Entries: []idlegrid.Entry{
				{Account: idlegrid.WorldAccount, Amount: 0}}},
			"no time": {IdempotencyKey: id("k"), Entries: topUp(r.ID, 1).Entries},
		} {
			_, err := db.PostTransfer(ctx, x)
			if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Errorf("%s: error %v, want EINVALID", name, err)
			}
		}
		checkLedger(t, db)
	})
}

func testListTransfers(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r1, r2 := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleRenter)
	x1 := topUp(r1.ID, 100)
	x2 := topUp(r2.ID, 200)
	x2.CreatedAt = at(time.Second)
	x3 := topUp(r1.ID, 300)
	x3.CreatedAt, x3.LeaseID = at(2*time.Second), "lease_1"
	for _, x := range []*idlegrid.Transfer{x1, x2, x3} {
		_, err := db.PostTransfer(ctx, x)
		mustOK(t, err)
	}
	for _, tt := range []struct {
		name string
		f    idlegrid.TransferFilter
		want []*idlegrid.Transfer
	}{
		{"all newest first", idlegrid.TransferFilter{}, []*idlegrid.Transfer{x3, x2, x1}},
		{"account", idlegrid.TransferFilter{AccountID: r1.ID}, []*idlegrid.Transfer{x3, x1}},
		{"lease", idlegrid.TransferFilter{LeaseID: "lease_1"}, []*idlegrid.Transfer{x3}},
		{"limit", idlegrid.TransferFilter{Limit: 1}, []*idlegrid.Transfer{x3}},
		{"one", idlegrid.TransferFilter{ID: x2.ID}, []*idlegrid.Transfer{x2}},
		{"one of the account's", idlegrid.TransferFilter{AccountID: r1.ID, ID: x2.ID}, nil},
		{"pages", idlegrid.TransferFilter{Before: x3.ID, Limit: 1}, []*idlegrid.Transfer{x2}},
		{"the account's pages", idlegrid.TransferFilter{AccountID: r1.ID, Before: x3.ID}, []*idlegrid.Transfer{x1}},
		{"after the last", idlegrid.TransferFilter{Before: x1.ID}, nil},
		{"after no transfer", idlegrid.TransferFilter{Before: "xfer_missing"}, nil},
		{"none", idlegrid.TransferFilter{AccountID: "acct_missing"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.ListTransfers(ctx, tt.f)
			mustOK(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListTransfers (-want +got):\n%s", diff)
			}
		})
	}
}

func testBalance(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	if b, want := *mustBalance(t, db, r.ID), (idlegrid.Balance{AccountID: r.ID}); b != want {
		t.Errorf("new account balance %+v, want %+v", b, want)
	}
	mustTopUp(t, db, r.ID, 7)
	if b, want := *mustBalance(t, db, r.ID), (idlegrid.Balance{AccountID: r.ID, Available: 7}); b != want {
		t.Errorf("balance %+v, want %+v", b, want)
	}
	_, err := db.Balance(ctx, "acct_missing")
	wantCode(t, err, idlegrid.ENOTFOUND)
}

func testSummary(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	empty, err := db.Summary(ctx)
	mustOK(t, err)
	if diff := cmp.Diff(&idlegrid.Summary{JobsByState: map[idlegrid.JobState]int{},
		NodesByState: map[idlegrid.NodeState]int{}}, empty); diff != "" {
		t.Errorf("empty Summary (-want +got):\n%s", diff)
	}

	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n1, n2 := mustNode(t, db, p.ID, 2), mustNode(t, db, p.ID, 4)
	mustNode(t, db, p.ID, 8)
	mustOK(t, db.SetNodeState(ctx, n2.ID, idlegrid.NodeOffline, t0))
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	done := mustJob(t, db, r.ID, 1, 1)
	l := lease(done, n1, 0)
	mustPlace(t, db, placement(done, 0, l))
	start(t, db, l)
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseSucceeded, ChargedMicros: 1000, At: at(time.Hour)}, settle(l, 1000))
	running := mustJob(t, db, r.ID, 1, 2)
	mustPlace(t, db, placement(running, 0, lease(running, n1, 0, 1)))
	mustJob(t, db, r.ID, 1, 1)
	// Inference is spent too: one request alone, then two in a batch.
	for _, cs := range [][]idlegrid.InferenceCharge{
		{chargeOf(r.ID, p.ID, "req_a", "k1", 500, at(time.Hour))},
		{chargeOf(r.ID, p.ID, "req_b", "k1", 200, at(time.Hour)), chargeOf(r.ID, p.ID, "req_c", "k1", 300, at(time.Hour))},
	} {
		for _, err := range db.RecordInference(ctx, cs) {
			mustOK(t, err)
		}
	}

	want := &idlegrid.Summary{
		JobsByState:  map[idlegrid.JobState]int{idlegrid.JobSucceeded: 1, idlegrid.JobRunning: 1, idlegrid.JobQueued: 1},
		NodesByState: map[idlegrid.NodeState]int{idlegrid.NodeOnline: 2, idlegrid.NodeOffline: 1},
		GPUsTotal:    10, GPUsBusy: 2,
		SpentMicros: 2000, EarnedMicros: 1800, FeesMicros: 200, HeldMicros: 4 * idlegrid.MicrosPerUnit,
	}
	check := func(when string) {
		t.Helper()
		got, err := db.Summary(ctx)
		mustOK(t, err)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Summary %s (-want +got):\n%s", when, diff)
		}
		if b := mustBalance(t, db, r.ID); b.Spent != 2000 {
			t.Errorf("renter spent %d %s, want the lease's 1000 and inference's 1000", b.Spent, when)
		}
	}
	check("as charged")
	// The migration that added the renters' spend sums what they were
	// charged before it.
	mustOK(t, sqlstore.Remigrate(ctx, db, 19))
	check("after migrating again")

	// What an upheld dispute refunds of the lease's earnings and of its
	// fee leaves earned and fees for refunded: spent is the three.
	d := &idlegrid.Dispute{ID: id("dispute"), Offence: "mismatched_result", State: idlegrid.DisputeUpheld, ProviderID: p.ID,
		LeaseID: l.ID, RenterID: r.ID, Evidence: "the re-runs agree on another output", HarmMicros: 1000, CreatedAt: at(2 * time.Hour)}
	tr, err := ledger.Refund(nil, p.ID, r.ID, l.ID, d.ID, d.Offence, 300, at(2*time.Hour))
	mustOK(t, err)
	tr, err = ledger.RefundFee(tr, r.ID, l.ID, d.ID, d.Offence, 40, at(2*time.Hour))
	mustOK(t, err)
	tr.ID = id("tx")
	mustOK(t, db.OpenDispute(ctx, d, tr, nil))
	want.EarnedMicros, want.FeesMicros, want.RefundedMicros = 1500, 160, 340
	check("after a dispute's refunds")
	// The migration that has the balances keep what came in and what
	// penalties refunded sums both from the ledger's entries.
	mustOK(t, sqlstore.Remigrate(ctx, db, 44))
	check("after the balances' flows are migrated again")
}

// testConcurrentPlaceJob races placements of many jobs onto one GPU:
// exactly one wins, and the losers leave no trace.
func testConcurrentPlaceJob(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 2)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	const racers = 8
	var places []*idlegrid.Placement
	for i := 0; i < racers; i++ {
		j := mustJob(t, db, r.ID, 1, 2)
		places = append(places, placement(j, 0, lease(j, n, i%2, (i+1)%2)))
	}
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range places {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.PlaceJob(ctx, places[i])
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch idlegrid.ErrorCode(err) {
		case "":
			won++
		case idlegrid.ECONFLICT:
		default:
			t.Errorf("PlaceJob: %v, want success or ECONFLICT", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d placements won, want exactly 1", won)
	}
	checkLedger(t, db)
	b := mustBalance(t, db, r.ID)
	if b.Held != 4*idlegrid.MicrosPerUnit || b.Available != 96*idlegrid.MicrosPerUnit {
		t.Errorf("balance %+v, want one hold of $4", b)
	}
	leases, err := db.ListLeases(ctx, idlegrid.LeaseFilter{NodeID: n.ID})
	mustOK(t, err)
	if len(leases) != 1 {
		t.Errorf("%d leases, want 1", len(leases))
	}
}

// testConcurrentTransfers runs many writers at once: none may fail for
// being busy, and no micro may be lost.
func testConcurrentTransfers(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	j := mustJob(t, db, r.ID, 1, 1)
	const writers, each = 6, 20
	var wg sync.WaitGroup
	errs := make(chan error, 4*writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := db.PostTransfer(ctx, topUp(r.ID, 3))
				errs <- err
				x := &idlegrid.Transfer{IdempotencyKey: id("hold"), Kind: idlegrid.TransferHold, CreatedAt: t0,
					Entries: []idlegrid.Entry{
						{Account: idlegrid.RenterAvailable(r.ID), Amount: -1},
						{Account: idlegrid.RenterHeld(r.ID), Amount: 1},
					}}
				_, err = db.PostTransfer(ctx, x)
				errs <- err
				if _, err := db.Balance(ctx, r.ID); err != nil {
					errs <- err
				}
				// Read, then write: two such writers must queue, not deadlock.
				errs <- db.SetJobReason(ctx, j.ID, fmt.Sprintf("writer %d at %d", w, i), at(time.Second))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent transfer: %v", err)
		}
	}
	checkLedger(t, db)
	if b, want := *mustBalance(t, db, r.ID), (idlegrid.Balance{AccountID: r.ID, Available: 2 * writers * each,
		Held: writers * each}); b != want {
		t.Errorf("balance %+v, want %+v", b, want)
	}
}

// testReopen checks that reopening a store keeps its data and applies no
// migration twice.
func testReopen(t *testing.T, dsn string) {
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dsn)
	mustOK(t, err)
	a := &idlegrid.Account{ID: "acct_kept", Name: "Kept", Role: idlegrid.RoleAdmin, CreatedAt: t0}
	mustOK(t, db.CreateAccount(ctx, a))
	mustOK(t, db.Close())

	db = mustOpen(t, dsn)
	got, err := db.FindAccount(ctx, a.ID)
	mustOK(t, err)
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("after reopen (-want +got):\n%s", diff)
	}
	mustOK(t, db.Ping(ctx))
}

// testMarketLock: one server at a time holds a database's market lock; a
// second is refused, saying so, until the first lets go. On PostgreSQL a
// lock whose session ended is taken again on a new session at the next
// check when no other server took it meanwhile (the engine then rebuilds:
// GuardedDB).
func testMarketLock(t *testing.T, dsn string) {
	ctx := context.Background()
	first, second := mustOpen(t, dsn), mustOpen(t, dsn)
	held, err := first.LockMarket(ctx, time.Hour)
	mustOK(t, err)
	if _, err := second.LockMarket(ctx, 0); !errors.Is(err, sqlstore.ErrMarketLocked) || !strings.Contains(err.Error(), "(") {
		t.Fatalf("a second lock: %v, want ErrMarketLocked saying who holds it", err)
	}
	mustOK(t, held.Close())
	taken, err := second.LockMarket(ctx, 0)
	mustOK(t, err)
	mustOK(t, taken.Close())
	if !strings.HasPrefix(dsn, "postgres") {
		return
	}

	held, err = first.LockMarket(ctx, time.Hour)
	mustOK(t, err)
	defer held.Close()
	sqlstore.CheckMarketLock(held)
	if held.Err() != nil {
		t.Fatalf("a lock checked: %v, want it held", held.Err())
	}
	mustOK(t, sqlstore.KillMarketLock(ctx, second))
	sqlstore.CheckMarketLock(held)
	if held.Err() != nil {
		t.Fatalf("a lock whose session ended, and which no other server took, is lost: %v", held.Err())
	}
	if _, err := second.LockMarket(ctx, 0); !errors.Is(err, sqlstore.ErrMarketLocked) {
		t.Fatalf("a second lock once the first was taken again on a new session: %v, want ErrMarketLocked", err)
	}
	mustOK(t, held.Close())
	taken, err = second.LockMarket(ctx, 0)
	mustOK(t, err)
	defer taken.Close()
}

// testResumeFrom: a job requeued from a checkpoint holds the run its
// leases made up to it, across attempts, at most its duration, and the node
// that keeps it; a requeue with no new checkpoint leaves both. Placed on
// another node, it starts over there. A job that cannot resume holds none,
// nor does a gang.
func testResumeFrom(t *testing.T, db *sqlstore.DB) {
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	a, b := mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1)
	j := newJob(r.ID, 1, 1) // a run of an hour
	j.CheckpointEverySeconds = 600
	mustOK(t, db.CreateJob(context.Background(), j))
	for _, step := range []struct {
		attempt    int
		on         *idlegrid.Node
		start, end time.Duration
		ref        string
		want       int64
		wantNode   *idlegrid.Node
	}{
		{0, a, 2 * time.Minute, 30 * time.Minute, "ckpt-1", 28 * 60, a},   // ran 28 minutes to its checkpoint on a
		{1, a, 40 * time.Minute, 41 * time.Minute, "", 28 * 60, a},        // lost before a new checkpoint
		{2, a, 50 * time.Minute, 70 * time.Minute, "ckpt-1", 48 * 60, a},  // 20 more on a, under the same reference
		{3, b, 80 * time.Minute, 81 * time.Minute, "", 0, nil},            // on b it started over, and saved nothing
		{4, b, 90 * time.Minute, 100 * time.Minute, "ckpt-1", 10 * 60, b}, // 10 minutes on b
		{5, b, 110 * time.Minute, 190 * time.Minute, "ckpt-1", 3600, b},   // 90 minutes held, more than the run
	} {
		l := lease(j, step.on, 0)
		pl := placement(j, step.attempt, l)
		pl.At = at(step.start - time.Second)
		if step.attempt%2 == 0 {
			mustPlace(t, db, pl)
		} else { // batched, as the scheduler places
			mustOK(t, db.PlaceJobs(context.Background(), []*idlegrid.Placement{pl})[0])
		}
		mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
			To: idlegrid.LeaseRunning, Reason: "started", At: at(step.start)})
		mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
			To: idlegrid.LeaseLost, Reason: "node lost", CheckpointRef: step.ref, At: at(step.end)})
		got := mustJobState(t, db, j.ID, idlegrid.JobQueued, "requeued")
		wantNode := ""
		if step.wantNode != nil {
			wantNode = step.wantNode.ID
		}
		if got.ResumeSeconds != step.want || got.CheckpointNodeID != wantNode {
			t.Errorf("after attempt %d: resumes with %d s done on %q, want %d on %q", step.attempt+1, got.ResumeSeconds,
				got.CheckpointNodeID, step.want, wantNode)
		}
	}

	// A job whose workload cannot resume (no checkpoint_every_seconds)
	// holds no run and no node, whatever its runtime kept.
	once := mustJob(t, db, r.ID, 1, 1)
	l := lease(once, a, 0)
	mustPlace(t, db, placement(once, 0, l))
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
		To: idlegrid.LeaseRunning, Reason: "started", At: at(time.Minute)})
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseLost, Reason: "node lost", CheckpointRef: "docker-volume:x", At: at(30 * time.Minute)})
	if got := mustJobState(t, db, once.ID, idlegrid.JobQueued, "requeued"); got.ResumeSeconds != 0 || got.CheckpointNodeID != "" {
		t.Errorf("a job that cannot resume holds %d s on %q, want none", got.ResumeSeconds, got.CheckpointNodeID)
	}

	// Nor does a gang: its checkpoints are spread over its nodes. It keeps
	// the reference, which its workloads read where they find it.
	gang := newJob(r.ID, 2, 1)
	gang.CheckpointEverySeconds = 600
	mustOK(t, db.CreateJob(context.Background(), gang))
	la, lb := lease(gang, a, 0), lease(gang, b, 0)
	mustPlace(t, db, placement(gang, 0, la, lb))
	for _, l := range []*idlegrid.Lease{la, lb} {
		mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
			To: idlegrid.LeaseRunning, Reason: "started", At: at(time.Minute)})
	}
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: lb.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseLost, Reason: "node lost", At: at(30 * time.Minute)})
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: la.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseLost, Reason: "node lost", CheckpointRef: "docker-volume:g", At: at(30 * time.Minute)})
	if got := mustJobState(t, db, gang.ID, idlegrid.JobQueued, ""); got.ResumeSeconds != 0 || got.CheckpointNodeID != "" || got.CheckpointRef != "docker-volume:g" {
		t.Errorf("a requeued gang holds %d s on %q from %q, want none, from docker-volume:g", got.ResumeSeconds, got.CheckpointNodeID, got.CheckpointRef)
	}
}

// testJobTiers: a list by tier keeps the jobs of those tiers, with the
// other filters and in the asked order; the migration that added the
// column fills it from the specs stored before.
func testJobTiers(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	byTier := map[idlegrid.Tier][]string{}
	for i, tier := range []idlegrid.Tier{idlegrid.TierBronze, idlegrid.TierGold, idlegrid.TierSilver, idlegrid.TierGold, idlegrid.TierBronze} {
		j := newJob(r.ID, 1, 1)
		j.Tier, j.State, j.CreatedAt = tier, idlegrid.JobQueued, at(time.Duration(i)*time.Second)
		mustOK(t, db.CreateJob(ctx, j))
		byTier[tier] = append(byTier[tier], j.ID) // oldest first
	}
	gold, silver, bronze := byTier[idlegrid.TierGold], byTier[idlegrid.TierSilver], byTier[idlegrid.TierBronze]
	check := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			tiers []idlegrid.Tier
			after string
			want  []string
		}{
			{[]idlegrid.Tier{idlegrid.TierGold}, "", gold},
			{[]idlegrid.Tier{idlegrid.TierBronze}, "", bronze},
			{[]idlegrid.Tier{idlegrid.TierGold, idlegrid.TierSilver}, "", []string{gold[0], silver[0], gold[1]}},
			{[]idlegrid.Tier{idlegrid.TierGold, idlegrid.TierBronze}, silver[0], []string{gold[1], bronze[1]}},
		} {
			jobs, err := db.ListJobs(ctx, idlegrid.JobFilter{RenterID: r.ID, States: []idlegrid.JobState{idlegrid.JobQueued},
				Tiers: tc.tiers, After: tc.after, OldestFirst: true})
			mustOK(t, err)
			var got []string
			for _, j := range jobs {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: queued jobs of %v after %q, oldest first: %v, want %v", when, tc.tiers, tc.after, got, tc.want)
			}
		}
	}
	check("as stored")
	mustOK(t, sqlstore.Remigrate(ctx, db, 28))
	check("after migrating again")
}

// testJobNamePrefix: a list by the start of the jobs' names keeps those
// whose name begins so, case and all, with the other filters and pages.
func testJobNamePrefix(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, other := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleRenter)
	var sweep []string
	for i, name := range []string{"lr-search-1", "lr-search-2", "LR-SEARCH-3", "lr-search", "ünï-1", "", "lr-search-4"} {
		j := newJob(r.ID, 1, 1)
		j.Name, j.CreatedAt = name, at(time.Duration(i)*time.Second)
		mustOK(t, db.CreateJob(ctx, j))
		if strings.HasPrefix(name, "lr-search-") {
			sweep = append([]string{j.ID}, sweep...) // newest first
		}
	}
	theirs := newJob(other.ID, 1, 1)
	theirs.Name = "lr-search-9"
	mustOK(t, db.CreateJob(ctx, theirs))
	ids := func(f idlegrid.JobFilter) []string {
		t.Helper()
		jobs, err := db.ListJobs(ctx, f)
		mustOK(t, err)
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	if got := ids(idlegrid.JobFilter{RenterID: r.ID, NamePrefix: "lr-search-"}); !slices.Equal(got, sweep) {
		t.Errorf("jobs named lr-search-…: %v, want %v", got, sweep)
	}
	if got := ids(idlegrid.JobFilter{RenterID: r.ID, NamePrefix: "lr-search-", Limit: 1, Before: sweep[0]}); !slices.Equal(got, sweep[1:2]) {
		t.Errorf("the second page of one: %v, want %v", got, sweep[1:2])
	}
	if got := ids(idlegrid.JobFilter{NamePrefix: "lr-search-"}); len(got) != 4 {
		t.Errorf("every renter's lr-search-…: %d jobs, want 4", len(got))
	}
	if got := ids(idlegrid.JobFilter{RenterID: r.ID, NamePrefix: "ünï"}); len(got) != 1 {
		t.Errorf("jobs named ünï…: %v, want one", got)
	}
	if got := ids(idlegrid.JobFilter{RenterID: r.ID, NamePrefix: "lr-search-", States: []idlegrid.JobState{idlegrid.JobRunning}}); len(got) != 0 {
		t.Errorf("running jobs named lr-search-…: %v, want none", got)
	}
}
