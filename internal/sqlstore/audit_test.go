package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testAudit holds the store to the audit log's contract: every posting,
// receipt and lease transition is logged in the transaction that writes
// it, and only when it commits; indices have no gaps, even under
// concurrent writers; the tree over the stored leaves proves every entry.
func testAudit(t *testing.T, db *sqlstore.DB) {
	t.Run("Logged", func(t *testing.T) { testAuditLogged(t, db) })
	t.Run("RolledBack", func(t *testing.T) { testAuditRolledBack(t, db) })
	t.Run("Concurrent", func(t *testing.T) { testAuditConcurrent(t, db) })
	t.Run("AppendAudit", func(t *testing.T) { testAuditAppend(t, db) })
	t.Run("Proofs", func(t *testing.T) { testAuditProofs(t, db) })
	t.Run("Signer", func(t *testing.T) { testAuditSigner(t, db) })
}

// testAuditSigner: the first claim of the log's signer is kept, even
// among servers claiming at once; later claims get it back.
func testAuditSigner(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	got, err := db.AuditSigner(ctx)
	mustOK(t, err)
	if !got.IsZero() {
		t.Fatalf("a fresh log's signer = %+v, want none", got)
	}
	_, err = db.ClaimAuditSigner(ctx, idlegrid.AuditSigner{})
	wantField(t, err, "audit_signer.public_key")
	_, err = db.ClaimAuditSigner(ctx, idlegrid.AuditSigner{PublicKey: "key"})
	wantField(t, err, "audit_signer.since")

	at := time.Date(2026, 12, 3, 12, 0, 0, 123456000, time.UTC)
	claims := make([]idlegrid.AuditSigner, 6)
	var wg sync.WaitGroup
	for i := range claims {
		wg.Go(func() {
			var err error
			claims[i], err = db.ClaimAuditSigner(ctx, idlegrid.AuditSigner{PublicKey: fmt.Sprintf("key-%d", i), Since: at.Add(time.Duration(i) * time.Second)})
			if err != nil {
				t.Errorf("claim %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	first := claims[0]
	if !strings.HasPrefix(first.PublicKey, "key-") {
		t.Fatalf("claim 0 got %+v, want one of the claimed keys", first)
	}
	i, _ := strconv.Atoi(strings.TrimPrefix(first.PublicKey, "key-"))
	if want := at.Add(time.Duration(i) * time.Second); !first.Since.Equal(want) {
		t.Errorf("%s recorded since %v, want %v", first.PublicKey, first.Since, want)
	}
	for i, c := range claims {
		if c != first {
			t.Errorf("claim %d got %+v, claim 0 got %+v: want the same signer", i, c, first)
		}
	}
	later, err := db.ClaimAuditSigner(ctx, idlegrid.AuditSigner{PublicKey: "key-later", Since: at.Add(time.Hour)})
	mustOK(t, err)
	if got, err = db.AuditSigner(ctx); err != nil || got != first || later != first {
		t.Errorf("after a later claim: AuditSigner %+v, %v; the claim got %+v; want %+v", got, err, later, first)
	}
}

func mustAuditSize(tb testing.TB, db *sqlstore.DB) uint64 {
	tb.Helper()
	n, err := db.AuditSize(context.Background())
	mustOK(tb, err)
	return n
}

// mustAuditFrom returns every entry from index from on, checking that the
// indices run on without gaps and that each leaf hash is its entry's.
func mustAuditFrom(tb testing.TB, db *sqlstore.DB, f idlegrid.AuditFilter) []*idlegrid.AuditEntry {
	tb.Helper()
	f.Limit = 100000
	es, err := db.ListAuditEntries(context.Background(), f)
	mustOK(tb, err)
	for i, e := range es {
		if f.Subject == "" && e.Index != f.From+uint64(i) {
			tb.Fatalf("entry %d has index %d, want %d: the log has a gap", i, e.Index, f.From+uint64(i))
		}
		x := audit.EntryOf(e)
		h, err := x.LeafHash()
		mustOK(tb, err)
		if h != audit.Hash(e.LeafHash) {
			tb.Fatalf("entry %d: stored leaf hash %x, the entry hashes to %s", e.Index, e.LeafHash, h)
		}
	}
	return es
}

func kinds(es []*idlegrid.AuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Kind
	}
	return out
}

func testAuditLogged(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	from := mustAuditSize(t, db)
	l := mustRunningLease(t, db)
	rs := receiptChain(l, 2)
	mustOK(t, db.AppendReceipts(ctx, l.ID, rs))
	charge := 2 * price / 60
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseSucceeded, Reason: "exit 0", ChargedMicros: charge, At: at(5 * time.Minute)}, settle(l, charge))

	es := mustAuditFrom(t, db, idlegrid.AuditFilter{From: from})
	want := []string{"node.joined", "ledger.posting", "lease.transition", "ledger.posting", "lease.transition",
		"receipt", "receipt", "lease.transition", "ledger.posting"}
	if diff := cmp.Diff(want, kinds(es)); diff != "" {
		t.Fatalf("kinds logged (-want +got):\n%s", diff)
	}
	if got := mustAuditSize(t, db); got != from+uint64(len(want)) {
		t.Errorf("AuditSize = %d, want %d", got, from+uint64(len(want)))
	}
	es, want = es[1:], want[1:] // the node's join, then the lease's entries, the renter's among them

	t.Run("Payloads", func(t *testing.T) {
		var hold idlegrid.Transfer
		mustOK(t, json.Unmarshal(es[2].Payload, &hold))
		if hold.IdempotencyKey != "hold:"+l.ID || hold.Entries[1].Amount != l.HoldMicros {
			t.Errorf("hold entry's payload = %+v, want the hold of lease %s", hold, l.ID)
		}
		var r idlegrid.Receipt
		mustOK(t, json.Unmarshal(es[5].Payload, &r))
		if r.Hash() != rs[1].Hash() || r.Signature != rs[1].Signature {
			t.Errorf("receipt entry's payload = %+v, want receipt 2 as signed", r)
		}
		if !es[5].At.Equal(rs[1].End) {
			t.Errorf("receipt entry at %s, want its end %s", es[5].At, rs[1].End)
		}
		var ended struct {
			From, To      idlegrid.LeaseState
			ChargedMicros idlegrid.Micros `json:"charged_micros"`
		}
		mustOK(t, json.Unmarshal(es[6].Payload, &ended))
		if ended.From != idlegrid.LeaseRunning || ended.To != idlegrid.LeaseSucceeded || ended.ChargedMicros != charge {
			t.Errorf("end of lease = %+v, want running → succeeded charging %d", ended, charge)
		}
		if !es[6].At.Equal(at(5 * time.Minute)) {
			t.Errorf("transition at %s, want %s", es[6].At, at(5*time.Minute))
		}
	})
	t.Run("BySubject", func(t *testing.T) {
		renter := mustAuditFrom(t, db, idlegrid.AuditFilter{Subject: l.RenterID})
		if diff := cmp.Diff(want, kinds(renter)); diff != "" {
			t.Errorf("the renter's entries (-want +got):\n%s", diff)
		}
		// The provider is named by the lease's entries and by its earnings,
		// not by the renter's top-up and hold.
		provider := mustAuditFrom(t, db, idlegrid.AuditFilter{Subject: l.ProviderID})
		wantProvider := []string{"node.joined", "lease.transition", "lease.transition", "receipt", "receipt", "lease.transition", "ledger.posting"}
		if diff := cmp.Diff(wantProvider, kinds(provider)); diff != "" {
			t.Errorf("the provider's entries (-want +got):\n%s", diff)
		}
		page := mustAuditFrom(t, db, idlegrid.AuditFilter{Subject: l.RenterID, From: renter[2].Index, Before: renter[5].Index})
		if got, want := len(page), 3; got != want {
			t.Errorf("a page [%d, %d) of the renter's entries has %d, want %d", renter[2].Index, renter[5].Index, got, want)
		}
		none := mustAuditFrom(t, db, idlegrid.AuditFilter{Subject: "acct_nobody"})
		if len(none) != 0 {
			t.Errorf("an unknown subject has %d entries, want 0", len(none))
		}
	})
}

func testAuditRolledBack(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	l := mustRunningLease(t, db)
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 2)
	before := mustAuditSize(t, db)

	overdraw := topUp(r.ID, idlegrid.MicrosPerUnit)
	overdraw.Entries[0].Account, overdraw.Entries[1].Account = idlegrid.RenterAvailable(r.ID), idlegrid.WorldAccount
	_, err := db.PostTransfer(ctx, overdraw)
	wantCode(t, err, idlegrid.EPAYMENT)

	j := mustJob(t, db, r.ID, 1, 1) // r has no money: the hold fails after the lease is written
	wantCode(t, db.PlaceJob(ctx, placement(j, 0, lease(j, n, 0))), idlegrid.EPAYMENT)

	wantCode(t, db.TransitionLease(ctx, &idlegrid.LeaseTransition{LeaseID: l.ID,
		From: []idlegrid.LeaseState{idlegrid.LeaseAssigned}, To: idlegrid.LeaseRunning, At: at(3 * time.Minute)}, nil),
		idlegrid.ECONFLICT)
	// The transition itself would apply; its settlement overdraws.
	wantCode(t, db.TransitionLease(ctx, &idlegrid.LeaseTransition{LeaseID: l.ID,
		From: []idlegrid.LeaseState{idlegrid.LeaseRunning}, To: idlegrid.LeaseSucceeded, At: at(3 * time.Minute)},
		[]*idlegrid.Transfer{settle(l, 100*idlegrid.MicrosPerUnit)}), idlegrid.EPAYMENT)

	rs := receiptChain(l, 2)
	wantCode(t, db.AppendReceipts(ctx, l.ID, []idlegrid.Receipt{rs[0], rs[0]}), idlegrid.ECONFLICT)

	if got := mustAuditSize(t, db); got != before {
		t.Fatalf("after five failed changes the log has %d entries, want %d", got, before)
	}

	// In a batch, a placement rolled back to its savepoint takes its
	// entries with it; the others' stay.
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	before = mustAuditSize(t, db)
	poor := mustAccount(t, db, idlegrid.RoleRenter)
	ok, broke := mustJob(t, db, r.ID, 1, 1), mustJob(t, db, poor.ID, 1, 1)
	okLease := lease(ok, n, 1)
	errs := db.PlaceJobs(ctx, []*idlegrid.Placement{
		placement(broke, 0, lease(broke, n, 0)), // its lease is written, then its hold fails
		placement(ok, 0, okLease),
	})
	wantCode(t, errs[0], idlegrid.EPAYMENT)
	mustOK(t, errs[1])
	es := mustAuditFrom(t, db, idlegrid.AuditFilter{From: before})
	if diff := cmp.Diff([]string{"lease.transition", "ledger.posting"}, kinds(es)); diff != "" {
		t.Fatalf("entries of the batch (-want +got):\n%s", diff)
	}
	for _, e := range es {
		if !slices.Contains(e.Subjects, okLease.ID) {
			t.Errorf("entry %d (%s) names %v, want lease %s", e.Index, e.Kind, e.Subjects, okLease.ID)
		}
	}
}

func testAuditConcurrent(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	const writers, each = 8, 10
	renters := make([]*idlegrid.Account, writers)
	for i := range renters {
		renters[i] = mustAccount(t, db, idlegrid.RoleRenter)
	}
	before := mustAuditSize(t, db)
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for _, r := range renters {
		wg.Go(func() {
			for range each {
				if _, err := db.PostTransfer(ctx, topUp(r.ID, idlegrid.MicrosPerUnit)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	es := mustAuditFrom(t, db, idlegrid.AuditFilter{From: before})
	if len(es) != writers*each {
		t.Fatalf("%d concurrent postings logged %d entries, want %d", writers*each, len(es), writers*each)
	}
	if got := mustAuditSize(t, db); got != before+writers*each {
		t.Errorf("AuditSize = %d, want %d", got, before+writers*each)
	}
	seen := map[string]bool{}
	for _, e := range es {
		var x idlegrid.Transfer
		mustOK(t, json.Unmarshal(e.Payload, &x))
		if seen[x.ID] {
			t.Errorf("transfer %s logged twice", x.ID)
		}
		seen[x.ID] = true
	}
}

func testAuditAppend(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	before := mustAuditSize(t, db)
	e := &idlegrid.AuditEntry{Kind: string(audit.KindPolicy), Payload: json.RawMessage(`{"version": 1, "sha256": "ab"}`), At: t0}
	first, err := db.AppendAudit(ctx, []*idlegrid.AuditEntry{e})
	mustOK(t, err)
	if first != before || e.Index != before {
		t.Errorf("AppendAudit = %d (entry index %d), want %d", first, e.Index, before)
	}
	got := mustAuditFrom(t, db, idlegrid.AuditFilter{From: before})
	if len(got) != 1 || got[0].LeafHash != e.LeafHash || got[0].Kind != e.Kind {
		t.Errorf("stored %+v, want %+v", got, e)
	}

	bad := &idlegrid.AuditEntry{Kind: "Not A Kind", Payload: json.RawMessage(`{}`), At: t0}
	_, err = db.AppendAudit(ctx, []*idlegrid.AuditEntry{{Kind: "trust.policy", Payload: json.RawMessage(`{}`), At: t0}, bad})
	wantCode(t, err, idlegrid.EINVALID)
	_, err = db.AppendAudit(ctx, nil)
	wantCode(t, err, idlegrid.EINVALID)
	if got := mustAuditSize(t, db); got != before+1 {
		t.Errorf("after refused appends the log has %d entries, want %d", got, before+1)
	}
	_, err = db.AuditLeafHashes(ctx, before, before+2)
	wantCode(t, err, idlegrid.EINVALID)
}

func testAuditProofs(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	// Enough entries for the tree's cached subtrees of 16 leaves and up.
	for range 4 {
		l := mustRunningLease(t, db)
		mustOK(t, db.AppendReceipts(ctx, l.ID, receiptChain(l, 3)))
	}
	tree := audit.NewTree(audit.StoreLeaves(db))
	size, root, err := tree.Head(ctx)
	mustOK(t, err)
	if size < 20 {
		t.Fatalf("the log has %d entries; the test wants 20 or more", size)
	}
	for _, e := range mustAuditFrom(t, db, idlegrid.AuditFilter{}) {
		proof, err := tree.InclusionProof(ctx, e.Index, size)
		mustOK(t, err)
		x := audit.EntryOf(e)
		leaf, err := x.LeafHash()
		mustOK(t, err)
		if err := audit.VerifyInclusion(e.Index, size, leaf, proof, root); err != nil {
			t.Errorf("entry %d: %v", e.Index, err)
		}
	}
	for _, old := range []uint64{1, 7, 16, size - 1} {
		oldRoot, err := tree.Root(ctx, old)
		mustOK(t, err)
		proof, err := tree.ConsistencyProof(ctx, old, size)
		mustOK(t, err)
		if err := audit.VerifyConsistency(old, size, oldRoot, root, proof); err != nil {
			t.Errorf("consistency %d → %d: %v", old, size, err)
		}
	}
	// A second reader of the same store sees the same tree.
	again, err := audit.NewTree(audit.StoreLeaves(db)).Root(ctx, size)
	mustOK(t, err)
	if again != root {
		t.Errorf("a fresh tree's root %s, want %s", again, root)
	}
	if _, err := audit.StoreLeaves(db).AppendLeaves(ctx, []audit.Hash{root}); err == nil {
		t.Error("appending a bare leaf hash to the store's log succeeded; it must refuse")
	}
}
