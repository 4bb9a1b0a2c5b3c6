package server_test

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

// mustAuditPage returns every entry of account (the caller's own for "")
// that ctx may see, paging by limit, with the heads of the pages.
func mustAuditPage(t *testing.T, srv *server.Server, ctx context.Context, account string, limit int) ([]audit.SignedTreeHead, []audit.EntryProof) {
	t.Helper()
	q := server.AuditQuery{AccountID: account, Limit: limit}
	var heads []audit.SignedTreeHead
	var entries []audit.EntryProof
	for {
		p, err := srv.AuditEntries(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		heads, entries = append(heads, *p.Head), append(entries, p.Entries...)
		if p.Next == nil {
			return heads, entries
		}
		q.TreeSize, q.From = p.Head.Size, *p.Next
	}
}

func entryKinds(es []audit.EntryProof) []string {
	var out []string
	for _, e := range es {
		if !slices.Contains(out, string(e.Entry.Kind)) {
			out = append(out, string(e.Entry.Kind))
		}
	}
	slices.Sort(out)
	return out
}

func mustCheck(t *testing.T, srv *server.Server, ev *audit.Evidence) *audit.Report {
	t.Helper()
	r := audit.Check(srv.AuditKey(), ev)
	if !r.OK() {
		t.Fatalf("Check: %v", r.Err())
	}
	return r
}

func TestServer_AuditEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		l, n := mustStarted(t, m, j)
		m.advance(t, 90*time.Second)
		mustSendReceipts(t, m, l.ID, 60, 30)
		code := 0
		if err := m.srv.ReportLease(n, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
			t.Fatal(err)
		}

		heads, mine := mustAuditPage(t, m.srv, m.renter, "", 0)
		want := []string{"lease.transition", "ledger.posting", "receipt"}
		if got := entryKinds(mine); !slices.Equal(got, want) {
			t.Errorf("the renter's entries are of kinds %v, want %v", got, want)
		}
		r := mustCheck(t, m.srv, &audit.Evidence{Heads: heads, Entries: mine})
		if r.EntriesIncluded != len(mine) {
			t.Errorf("%d of %d entries proven included", r.EntriesIncluded, len(mine))
		}
		for _, e := range mine {
			if !e.Entry.Concerns(m.renterID) {
				t.Errorf("the renter was shown entry %d about %v", e.Index, e.Entry.Subjects)
			}
		}

		func() { // pages of 2 reassemble into the same entries (no subtests inside a synctest bubble)
			pageHeads, paged := mustAuditPage(t, m.srv, m.renter, "", 2)
			if len(paged) != len(mine) || len(pageHeads) < 2 {
				t.Fatalf("pages of 2 gave %d entries in %d pages, want %d in several", len(paged), len(pageHeads), len(mine))
			}
			for i := range paged {
				if paged[i].Index != mine[i].Index {
					t.Errorf("paged entry %d has index %d, want %d", i, paged[i].Index, mine[i].Index)
				}
			}
			mustCheck(t, m.srv, &audit.Evidence{Heads: pageHeads, Entries: paged})
		}()
		func() { // each account sees its own entries; admins anyone's
			_, err := m.srv.AuditEntries(m.renter, server.AuditQuery{AccountID: l.ProviderID})
			wantCode(t, err, idlegrid.ENOTFOUND)
			_, theirs := mustAuditPage(t, m.srv, m.provider, "", 0)
			if got, want := entryKinds(theirs), []string{"lease.transition", "ledger.posting", "node.joined", "receipt"}; !slices.Equal(got, want) {
				t.Errorf("the provider's entries are of kinds %v, want %v (its nodes' joins too)", got, want)
			}
			for _, e := range theirs {
				if e.Entry.Kind == audit.KindPosting && strings.Contains(string(e.Entry.Payload), `"kind":"topup"`) {
					t.Errorf("the provider was shown the renter's top-up %d", e.Index)
				}
			}
			_, asAdmin := mustAuditPage(t, m.srv, m.admin, m.renterID, 0)
			if len(asAdmin) != len(mine) {
				t.Errorf("an admin sees %d of the renter's entries, want %d", len(asAdmin), len(mine))
			}
			_, err = m.srv.AuditHead(m.node)
			wantCode(t, err, idlegrid.EFORBIDDEN)
			_, err = m.srv.AuditHead(context.Background())
			wantCode(t, err, idlegrid.EUNAUTHORIZED)
		}()
		func() { // a later head extends an earlier one
			before, err := m.srv.AuditHead(m.provider) // anyone may read heads
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.srv.TopUp(m.admin, m.renterID, idlegrid.MicrosPerUnit, "later"); err != nil {
				t.Fatal(err)
			}
			after, err := m.srv.AuditHead(m.provider)
			if err != nil {
				t.Fatal(err)
			}
			p, err := m.srv.AuditConsistency(m.provider, before.Size, after.Size)
			if err != nil {
				t.Fatal(err)
			}
			r := mustCheck(t, m.srv, &audit.Evidence{Heads: []audit.SignedTreeHead{*before, *after}, Consistency: []audit.ConsistencyProof{*p}})
			if r.ExtensionsShown != 1 || after.Size != before.Size+1 {
				t.Errorf("sizes %d → %d, %d extensions shown; want one more entry, proven", before.Size, after.Size, r.ExtensionsShown)
			}
		}()
		func() { // a caller's mistakes are EINVALID naming the field
			size := heads[0].Size
			for _, tt := range []struct {
				name  string
				err   error
				field string
			}{
				{"FromAfterTo", second(m.srv.AuditConsistency(m.renter, size, size-1)), "from"},
				{"ToBeyondLog", second(m.srv.AuditConsistency(m.renter, 1, size+100)), "to"},
				{"TreeSizeBeyondLog", second(m.srv.AuditEntries(m.renter, server.AuditQuery{TreeSize: size + 100})), "tree_size"},
				{"Limit", second(m.srv.AuditEntries(m.renter, server.AuditQuery{Limit: server.MaxAuditEntries + 1})), "limit"},
			} {
				var e *idlegrid.Error
				if !asError(tt.err, &e) || e.Code != idlegrid.EINVALID || e.Field != tt.field {
					t.Errorf("%s: error %v, want EINVALID on %s", tt.name, tt.err, tt.field)
				}
			}
		}()
	})
}

func second[T any](_ T, err error) error { return err }

// auditServer is a coordinator with a fixed log key over a SQLite file,
// with an admin and a renter topped up n times: n entries.
type auditServer struct {
	dsn    string
	key    ed25519.PrivateKey
	srv    *server.Server
	store  *sqlstore.DB
	renter context.Context
}

func mustAuditServer(t *testing.T, n int) *auditServer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &auditServer{dsn: sqlstoretest.Path(t), key: key}
	a.open(t)
	ctx := context.Background()
	admin, _, _, err := a.srv.Bootstrap(ctx, "ops", idlegrid.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	renter, _, _, err := a.srv.CreateAccount(as(admin), "acme", idlegrid.RoleRenter)
	if err != nil {
		t.Fatal(err)
	}
	a.renter = as(renter)
	for i := range n {
		if _, err := a.srv.TopUp(as(admin), renter.ID, idlegrid.MicrosPerUnit, fmt.Sprint("top-up ", i)); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func (a *auditServer) open(t *testing.T) {
	t.Helper()
	store, err := sqlstore.Open(context.Background(), a.dsn)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Open(server.Config{Store: store, AuditKey: a.key, Logger: testLogger})
	if err != nil {
		t.Fatal(err)
	}
	a.srv, a.store = srv, store
	t.Cleanup(func() {
		if a.srv == srv {
			srv.Close()
			store.Close()
		}
	})
}

// rewrite stops the coordinator, changes one stored leaf, and starts it
// again: the log's history is rewritten.
func (a *auditServer) rewrite(t *testing.T, idx int) {
	t.Helper()
	a.srv.Close()
	a.store.Close()
	// Waits for the file's lock as the store's connections do: on a loaded
	// machine it was seen still locked a moment after the store closed
	// (SQLITE_BUSY at once, without a busy timeout).
	db, err := sql.Open("sqlite", a.dsn+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`UPDATE audit_entries SET leaf_hash = $1 WHERE idx = $2`, strings.Repeat("0f", 32), idx)
	// Closed before the server opens the file again: a connection closing
	// beside the server's could still hold the file's lock (SQLITE_BUSY).
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	a.open(t)
}

// TestServer_Audit_rewrittenHistory checks that heads signed before and
// after a change to the stored log prove it was rewritten, whether or not
// the log grew since, and wherever the change lies.
func TestServer_Audit_rewrittenHistory(t *testing.T) {
	for _, tt := range []struct {
		name string
		idx  int  // the leaf changed: in a subtree the tree caches, or in the ragged tail
		grow bool // whether an entry is logged after the change
		want audit.ProblemKind
	}{
		{"CachedSubtree", 3, false, audit.ProblemFork},
		{"CachedSubtreeGrown", 3, true, audit.ProblemInconsistent},
		{"Tail", 18, false, audit.ProblemFork},
		{"TailGrown", 18, true, audit.ProblemInconsistent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := mustAuditServer(t, 20)
			before, err := a.srv.AuditHead(a.renter)
			if err != nil {
				t.Fatal(err)
			}
			a.rewrite(t, tt.idx)
			if tt.grow {
				if _, err := a.store.AppendAudit(context.Background(), []*idlegrid.AuditEntry{{Kind: "trust.policy", Payload: []byte(`{}`), At: time.Now()}}); err != nil {
					t.Fatal(err)
				}
			}
			after, err := a.srv.AuditHead(a.renter)
			if err != nil {
				t.Fatal(err)
			}
			ev := &audit.Evidence{Heads: []audit.SignedTreeHead{*before, *after}}
			if tt.grow {
				p, err := a.srv.AuditConsistency(a.renter, before.Size, after.Size)
				if err != nil {
					t.Fatal(err)
				}
				ev.Consistency = []audit.ConsistencyProof{*p}
			}
			r := audit.Check(a.srv.AuditKey(), ev)
			if len(r.Problems) != 1 || r.Problems[0].Kind != tt.want {
				t.Errorf("Check found %+v, want one %s", r.Problems, tt.want)
			}
		})
	}
}

// TestServer_auditKeyReplaced: the first start records its key as the
// log's signer; a later start with another key is refused, naming both,
// since every head users hold would stop verifying.
func TestServer_auditKeyReplaced(t *testing.T) {
	store, err := sqlstore.Open(context.Background(), sqlstoretest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	key := func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	open := func(k ed25519.PrivateKey) error {
		srv, err := server.Open(server.Config{Store: store, AuditKey: k})
		if err == nil {
			srv.Close()
		}
		return err
	}
	first, other := key(), key()
	for _, k := range []ed25519.PrivateKey{first, first, nil} {
		if err := open(k); err != nil {
			t.Fatalf("Open: %v", err)
		}
	}
	err = open(other)
	if !errors.Is(err, server.ErrAuditKeyReplaced) {
		t.Fatalf("Open with another key: %v, want ErrAuditKeyReplaced", err)
	}
	for _, k := range []ed25519.PrivateKey{first, other} {
		if pub := audit.PublicKeyString(k.Public().(ed25519.PublicKey)); !strings.Contains(err.Error(), pub) {
			t.Errorf("the refusal %q does not name key %s", err, pub)
		}
	}
	if s, err := store.AuditSigner(context.Background()); err != nil || s.PublicKey != audit.PublicKeyString(first.Public().(ed25519.PublicKey)) {
		t.Errorf("recorded signer = %+v, %v; want the first key", s, err)
	}
}

// TestServer_AuditEntries_manyParties: a posting of several renters'
// and providers' money, as a batch of metered inference is, is an admin's
// to read whole; an account holder named in it does not see it in its
// audit entries, and sees its own lines, the rest summed, and no totals
// of the others in its transfers.
func TestServer_AuditEntries_manyParties(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		ctx := context.Background()
		other, _, _, err := m.srv.CreateAccount(m.admin, "another-renter", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{m.renterID, other.ID} {
			if _, err := m.srv.TopUp(m.admin, id, 10*idlegrid.MicrosPerUnit, "top-up of "+id); err != nil {
				t.Fatal(err)
			}
		}
		provider, err := m.srv.Me(m.provider)
		if err != nil {
			t.Fatal(err)
		}
		batch := &idlegrid.Transfer{ID: idlegrid.NewID("tx"), IdempotencyKey: "batch-1", Kind: idlegrid.TransferInference, CreatedAt: m.srv.Now(),
			Memo: "inference: 2 requests, $3.000000 charged",
			Entries: []idlegrid.Entry{
				{Account: idlegrid.RenterAvailable(m.renterID), Amount: -1_000_000},
				{Account: idlegrid.RenterAvailable(other.ID), Amount: -2_000_000},
				{Account: idlegrid.ProviderPending(provider.ID), Amount: 3_000_000},
			}}
		if _, err := m.store.PostTransfer(ctx, batch); err != nil {
			t.Fatal(err)
		}
		_, mine := mustAuditPage(t, m.srv, m.renter, "", 0)
		for _, e := range mine {
			if strings.Contains(string(e.Entry.Payload), batch.ID) {
				t.Errorf("the renter's audit entries show the batch of several renters' money: %s", e.Entry.Payload)
			}
		}
		_, all := mustAuditPage(t, m.srv, m.admin, m.renterID, 0)
		if !slices.ContainsFunc(all, func(e audit.EntryProof) bool { return strings.Contains(string(e.Entry.Payload), batch.ID) }) {
			t.Error("an admin does not see the batch among the renter's entries")
		}
		seen := batch.SeenBy(m.renterID)
		if strings.Contains(seen.Memo, "$3.000000") || len(seen.Entries) != 2 {
			t.Errorf("the renter sees the batch as %+v, want its own line, the others summed, and no totals", seen)
		}
	})
}
