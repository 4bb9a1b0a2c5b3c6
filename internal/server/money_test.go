package server_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

// mustMoneyMarket is mustMarket with a payout hold of a minute, and a
// renter whose caller carries its API key, as the HTTP layer's would.
func mustMoneyMarket(t *testing.T) *testMarket { return mustMoneyMarketOn(t, nil) }

// mustMoneyMarketOn is mustMoneyMarket whose coordinator uses the store
// wrap returns in place of the database, when wrap is not nil.
func mustMoneyMarketOn(t *testing.T, wrap func(idlegrid.Store) idlegrid.Store) *testMarket {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, sqlstoretest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	var coordinated idlegrid.Store = store
	if wrap != nil {
		coordinated = wrap(store)
	}
	srv, err := server.Open(server.Config{Store: coordinated, HeartbeatInterval: 10 * time.Second, FeeBasisPoints: 1000,
		PayoutHold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); store.Close() })
	m := &testMarket{srv: srv, store: store}
	admin, _, _, err := srv.Bootstrap(ctx, "ops", idlegrid.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	m.admin = as(admin)
	renter, key, _, err := srv.CreateAccount(m.admin, "acme", idlegrid.RoleRenter)
	if err != nil {
		t.Fatal(err)
	}
	m.renterID = renter.ID
	m.renter = idlegrid.NewContextWithCaller(ctx, &idlegrid.Caller{AccountID: renter.ID, Role: renter.Role, KeyID: key.ID})
	if _, err := srv.TopUp(m.admin, renter.ID, 100*idlegrid.MicrosPerUnit, "first"); err != nil {
		t.Fatal(err)
	}
	provider, _, _, err := srv.CreateAccount(m.admin, "gpu-barn", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	m.provider = as(provider)
	for i, name := range []string{"barn-1", "barn-2"} {
		id := mustJoin(t, m, name)
		n := idlegrid.NewContextWithCaller(ctx, &idlegrid.Caller{NodeID: id, AccountID: provider.ID, Role: idlegrid.RoleProvider})
		o := testOffer(name)
		if i == 1 {
			o.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 500_000
		}
		if err := srv.UpdateOffer(n, idlegrid.OfferRequest{Offer: o}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			m.node, m.nodeID = n, id
		} else {
			m.rival = n
		}
	}
	return m
}

// mustRun runs a job of spec on the first node for ran and reports it
// succeeded; it returns the ended lease.
func mustRun(t *testing.T, m *testMarket, spec idlegrid.JobSpec, ran time.Duration) *idlegrid.Lease {
	t.Helper()
	j, err := m.srv.SubmitJob(m.renter, spec)
	if err != nil {
		t.Fatal(err)
	}
	l, n := mustStarted(t, m, j)
	m.advance(t, ran)
	code := 0
	if err := m.srv.ReportLease(n, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	l, _, err = m.srv.FindLease(m.admin, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mustStarted lets the scheduler place j and starts it; it returns the
// lease and the node that runs it.
func mustStarted(t *testing.T, m *testMarket, j *idlegrid.Job) (*idlegrid.Lease, context.Context) {
	t.Helper()
	started := reportOn(t, m, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}, func(c idlegrid.Command) bool {
		return c.Kind == idlegrid.CommandStart && c.Lease.JobID == j.ID
	})
	if len(started) == 0 {
		got, _ := m.srv.FindJob(m.renter, j.ID)
		t.Fatalf("job %s not started: %s (%s)", j.ID, got.State, got.Reason)
	}
	return started[0].lease, started[0].node
}

// answered is a command's lease and the node that answered it.
type answered struct {
	lease *idlegrid.Lease
	node  context.Context
}

// reportOn lets the scheduler act, then reports r, as the agents of m's
// nodes would, on each lease whose command match picks.
func reportOn(t *testing.T, m *testMarket, r idlegrid.LeaseReport, match func(idlegrid.Command) bool) []answered {
	t.Helper()
	synctest.Wait()
	var out []answered
	for _, n := range []context.Context{m.node, m.rival} {
		cmds, err := m.srv.Commands(n, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			if !match(c) {
				continue
			}
			if err := m.srv.ReportLease(n, c.Lease.ID, r); err != nil {
				t.Fatal(err)
			}
			out = append(out, answered{c.Lease, n})
		}
	}
	return out
}

func mustBalance(t *testing.T, ctx context.Context, srv *server.Server) *idlegrid.Balance {
	t.Helper()
	b, err := srv.Balance(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustSettlement returns the one settle transfer of a lease.
func mustSettlement(t *testing.T, m *testMarket, leaseID string) *idlegrid.Transfer {
	t.Helper()
	ts, err := m.store.ListTransfers(context.Background(), idlegrid.TransferFilter{LeaseID: leaseID, Kinds: []idlegrid.TransferKind{idlegrid.TransferSettle}})
	if err != nil || len(ts) != 1 {
		t.Fatalf("settlements of %s: %+v (%v), want one", leaseID, ts, err)
	}
	return ts[0]
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := idlegrid.ErrorCode(err); got != code {
		t.Fatalf("error %v (code %q), want %q", err, got, code)
	}
}

func TestServer_PayoutHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		l := mustRun(t, m, testSpec(), 90*time.Second)
		earned := l.ChargedMicros - l.ChargedMicros/10
		if b := mustBalance(t, m.provider, m.srv); b.Pending != earned || b.Payable != 0 {
			t.Fatalf("just settled: pending %s payable %s, want %s pending", b.Pending, b.Payable, earned)
		}
		if err := m.srv.Reap(context.Background()); err != nil {
			t.Fatal(err)
		}
		if b := mustBalance(t, m.provider, m.srv); b.Pending != earned {
			t.Fatalf("inside the hold: pending %s, want %s", b.Pending, earned)
		}
		m.advance(t, time.Minute+10*time.Second)                 // the reaper runs on its own meanwhile
		if err := m.srv.Reap(context.Background()); err != nil { // and again: a no-op
			t.Fatal(err)
		}
		if b := mustBalance(t, m.provider, m.srv); b.Pending != 0 || b.Payable != earned {
			t.Fatalf("past the hold: pending %s payable %s, want %s payable", b.Pending, b.Payable, earned)
		}
		ts, err := m.store.ListTransfers(context.Background(), idlegrid.TransferFilter{Kinds: []idlegrid.TransferKind{idlegrid.TransferMature}})
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 || ts[0].IdempotencyKey != "mature:settle:"+l.ID {
			t.Fatalf("mature transfers %+v, want one for settle:%s", ts, l.ID)
		}
		mustLedgerBalanced(t, m.store)
	})
}

func TestServer_Payouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		mustRun(t, m, testSpec(), 30*time.Minute)
		m.advance(t, 2*time.Minute)
		payable := mustBalance(t, m.provider, m.srv).Payable
		if payable <= 0 {
			t.Fatalf("payable %s, want earnings", payable)
		}

		_, err := m.srv.RequestPayout(m.provider, payable+1, "too-much")
		wantCode(t, err, idlegrid.EPAYMENT)
		_, err = m.srv.RequestPayout(m.renter, 1, "k")
		wantCode(t, err, idlegrid.EFORBIDDEN)
		_, err = m.srv.RequestPayout(m.provider, 1, "")
		wantCode(t, err, idlegrid.EINVALID)

		p, err := m.srv.RequestPayout(m.provider, payable/2, "week-48")
		if err != nil {
			t.Fatal(err)
		}
		again, err := m.srv.RequestPayout(m.provider, payable/2, "week-48")
		if err != nil || again.ID != p.ID {
			t.Fatalf("retried request = %v, %v; want payout %s again", again, err, p.ID)
		}
		if b := mustBalance(t, m.provider, m.srv); b.Payable != payable-payable/2 || b.PayoutInFlight != payable/2 {
			t.Fatalf("after the request: %+v", b)
		}
		_, err = m.srv.SettlePayout(m.provider, p.ID, "wire", "op-1")
		wantCode(t, err, idlegrid.EFORBIDDEN)
		done, err := m.srv.SettlePayout(m.admin, p.ID, "wire 2026-11-30", "op-1")
		if err != nil {
			t.Fatal(err)
		}
		if done.State != idlegrid.PayoutSettled || done.Reason != "wire 2026-11-30" {
			t.Fatalf("settled payout %+v", done)
		}
		if again, err := m.srv.SettlePayout(m.admin, p.ID, "wire 2026-11-30", "op-1"); err != nil || again.State != idlegrid.PayoutSettled {
			t.Fatalf("retried settle = %v, %v", again, err)
		}
		_, err = m.srv.RejectPayout(m.admin, p.ID, "changed my mind", "op-2")
		wantCode(t, err, idlegrid.ECONFLICT)

		second, err := m.srv.RequestPayout(m.provider, payable-payable/2, "week-49")
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.srv.RejectPayout(m.admin, second.ID, "", "op-3")
		wantCode(t, err, idlegrid.EINVALID)
		if _, err := m.srv.RejectPayout(m.admin, second.ID, "bank details missing", "op-3"); err != nil {
			t.Fatal(err)
		}
		b := mustBalance(t, m.provider, m.srv)
		if b.Payable != payable-payable/2 || b.PayoutInFlight != 0 || b.PaidOut != payable/2 {
			t.Fatalf("after settling one and rejecting one: %+v", b)
		}

		mine, err := m.srv.ListPayouts(m.provider, idlegrid.PayoutFilter{})
		if err != nil || len(mine) != 2 {
			t.Fatalf("provider's payouts = %d (%v), want 2", len(mine), err)
		}
		settled, err := m.srv.ListPayouts(m.admin, idlegrid.PayoutFilter{States: []idlegrid.PayoutState{idlegrid.PayoutSettled}})
		if err != nil || len(settled) != 1 {
			t.Fatalf("settled payouts = %d (%v), want 1", len(settled), err)
		}
		_, err = m.srv.ListPayouts(m.renter, idlegrid.PayoutFilter{})
		wantCode(t, err, idlegrid.EFORBIDDEN)
		page, err := m.srv.ListPayouts(m.provider, idlegrid.PayoutFilter{Limit: 1})
		if err != nil || len(page) != 1 || page[0].ID != mine[0].ID {
			t.Fatalf("the first page of one = %+v (%v), want %s", page, err, mine[0].ID)
		}
		if page, err = m.srv.ListPayouts(m.provider, idlegrid.PayoutFilter{Before: mine[0].ID}); err != nil || len(page) != 1 || page[0].ID != mine[1].ID {
			t.Fatalf("the page after %s = %+v (%v), want %s", mine[0].ID, page, err, mine[1].ID)
		}
		_, err = m.srv.ListPayouts(m.provider, idlegrid.PayoutFilter{Before: "payout_missing"})
		wantCode(t, err, idlegrid.EINVALID)
		_, err = m.srv.ListPayouts(m.admin, idlegrid.PayoutFilter{ProviderID: m.renterID, Before: mine[0].ID}) // not that provider's
		wantCode(t, err, idlegrid.EINVALID)
		oldest, err := m.srv.ListPayouts(m.provider, idlegrid.PayoutFilter{OldestFirst: true, Limit: 1})
		if err != nil || len(oldest) != 1 || oldest[0].ID != mine[1].ID {
			t.Fatalf("the oldest = %+v (%v), want %s", oldest, err, mine[1].ID)
		}
		if page, err = m.srv.ListPayouts(m.provider, idlegrid.PayoutFilter{OldestFirst: true, After: mine[1].ID}); err != nil || len(page) != 1 || page[0].ID != mine[0].ID {
			t.Fatalf("the page after %s, oldest first = %+v (%v), want %s", mine[1].ID, page, err, mine[0].ID)
		}
		for _, f := range []idlegrid.PayoutFilter{
			{OldestFirst: true, Before: mine[1].ID}, // pages newest first
			{After: mine[1].ID},                     // pages oldest first
			{OldestFirst: true, After: "payout_missing"},
		} {
			_, err = m.srv.ListPayouts(m.provider, f)
			wantCode(t, err, idlegrid.EINVALID)
		}
		mustLedgerBalanced(t, m.store)
	})
}

func TestServer_SpendLimitAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		keyID := idlegrid.CallerFromContext(m.renter).KeyID
		half := idlegrid.MicrosPerUnit / 2
		if _, err := m.srv.SetKeyLimit(m.renter, keyID, &half); err != nil {
			t.Fatal(err)
		}
		j, err := m.srv.SubmitJob(m.renter, testSpec()) // holds at least $0.80: 2 GPUs for an hour at $0.40 or more
		if err != nil {
			t.Fatal(err)
		}
		if j.SubmittedByKey != keyID {
			t.Fatalf("job submitted by key %q, want %q", j.SubmittedByKey, keyID)
		}
		synctest.Wait()
		got, _ := m.srv.FindJob(m.renter, j.ID)
		if got.State != idlegrid.JobQueued || !strings.Contains(got.Reason, "spend limit of API key "+keyID+" would be exceeded ($0.500000 left)") {
			t.Fatalf("job = %s (%s), want queued for the key's spend limit", got.State, got.Reason)
		}

		five := 5 * idlegrid.MicrosPerUnit
		st, err := m.srv.SetKeyLimit(m.renter, keyID, &five)
		if err != nil {
			t.Fatal(err)
		}
		if st.LimitMicros != five || st.Spend.Used() != 0 {
			t.Fatalf("limit status %+v", st)
		}
		l, _ := mustStarted(t, m, j)
		limits, err := m.srv.ListSpendLimits(m.renter, "")
		if err != nil || len(limits) != 1 || limits[0].Spend.HeldMicros != l.HoldMicros {
			t.Fatalf("limits = %+v (%v), want the key's with the lease's %s held", limits, err, l.HoldMicros)
		}

		// An admin caps the whole account below what a second job would hold.
		_, err = m.srv.SetAccountLimit(m.renter, m.renterID, &five)
		wantCode(t, err, idlegrid.EFORBIDDEN)
		accountLimit := idlegrid.MicrosPerUnit + idlegrid.MicrosPerUnit/2
		if _, err := m.srv.SetAccountLimit(m.admin, m.renterID, &accountLimit); err != nil {
			t.Fatal(err)
		}
		j2, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got, _ = m.srv.FindJob(m.renter, j2.ID)
		if got.State != idlegrid.JobQueued || !strings.Contains(got.Reason, "spend limit of account "+m.renterID) {
			t.Fatalf("second job = %s (%s), want queued for the account's limit", got.State, got.Reason)
		}
		if _, err := m.srv.SetAccountLimit(m.admin, m.renterID, nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got, _ = m.srv.FindJob(m.renter, j2.ID); got.State != idlegrid.JobRunning {
			t.Fatalf("second job = %s (%s) once the limit is lifted, want running", got.State, got.Reason)
		}
		_, err = m.srv.SetKeyLimit(m.renter, "key_missing", &five)
		wantCode(t, err, idlegrid.ENOTFOUND)
		mustLedgerBalanced(t, m.store)
	})
}

func TestServer_SpendLimitWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		spec := testSpec()
		spec.Tier, spec.MaxPriceMicrosPerGPUHour = idlegrid.TierBronze, 600_000
		j, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		l, node := mustStarted(t, m, j)
		m.advance(t, 5*time.Minute)
		if n, err := m.srv.ListNotices(m.renter, idlegrid.NoticeFilter{}); err != nil || len(n) != 0 {
			t.Fatalf("notices before any limit: %+v (%v)", n, err)
		}

		// The admin lowers the account's limit below what is running.
		low := idlegrid.MicrosPerUnit / 100
		if _, err := m.srv.SetAccountLimit(m.admin, m.renterID, &low); err != nil {
			t.Fatal(err)
		}
		if err := m.srv.Reap(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, _, err := m.srv.FindLease(m.renter, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got.StopRequested, "notice: spend limit of account "+m.renterID+" reached") || got.NoticeAt == nil {
			t.Fatalf("lease stop = %q at %v, want a notice for the spend limit", got.StopRequested, got.NoticeAt)
		}
		notices, err := m.srv.ListNotices(m.renter, idlegrid.NoticeFilter{})
		if err != nil || len(notices) != 1 || notices[0].Kind != idlegrid.NoticeSpendLimit || notices[0].LeaseID != l.ID {
			t.Fatalf("notices = %+v (%v), want one spend-limit notice for %s", notices, err, l.ID)
		}
		if err := m.srv.Reap(context.Background()); err != nil { // a second pass tells no more
			t.Fatal(err)
		}
		if again, _ := m.srv.ListNotices(m.renter, idlegrid.NoticeFilter{}); len(again) != 1 {
			t.Fatalf("%d notices after a second pass, want 1", len(again))
		}
		if after, err := m.srv.ListNotices(m.renter, idlegrid.NoticeFilter{Before: notices[0].ID}); err != nil || len(after) != 0 {
			t.Fatalf("notices after the only one = %+v (%v), want none", after, err)
		}
		_, err = m.srv.ListNotices(m.admin, idlegrid.NoticeFilter{AccountID: idlegrid.CallerFromContext(m.admin).AccountID, Before: notices[0].ID}) // not the admin's
		wantCode(t, err, idlegrid.EINVALID)
		_, err = m.srv.ListNotices(m.renter, idlegrid.NoticeFilter{Limit: -1})
		wantCode(t, err, idlegrid.EINVALID)

		m.advance(t, 30*time.Second) // the workload stops within its notice, which is paid
		if err := m.srv.ReportLease(node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ended, _, _ := m.srv.FindLease(m.renter, l.ID)
		if billed := mustSettlement(t, m, l.ID).GPUSeconds; ended.State != idlegrid.LeasePreempted || ended.ChargedMicros <= 0 ||
			ended.ChargedMicros != idlegrid.CostOf(ended.PriceMicrosPerGPUHour, billed) {
			t.Fatalf("lease = %s charged %s, want preempted and charged for the %d GPU-s billed", ended.State, ended.ChargedMicros, billed)
		}
		job, _ := m.srv.FindJob(m.renter, j.ID)
		if job.State != idlegrid.JobQueued || !strings.Contains(job.Reason, "spend limit of account") {
			t.Fatalf("job = %s (%s), want queued, waiting for the spend limit", job.State, job.Reason)
		}
		mustLedgerBalanced(t, m.store)
	})
}

func TestServer_RunoutGivesNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		ctx := context.Background()
		// A renter with two cents, and a bronze lease whose escrow covers
		// only its first half minute, as an escrow topped up per interval
		// would: the job asks for a GPU model no node has, so the scheduler
		// leaves it to us.
		poor, key, _, err := m.srv.CreateAccount(m.admin, "thrifty", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		poorCtx := idlegrid.NewContextWithCaller(ctx, &idlegrid.Caller{AccountID: poor.ID, Role: poor.Role, KeyID: key.ID})
		if _, err := m.srv.TopUp(m.admin, poor.ID, 20_000, "cents"); err != nil {
			t.Fatal(err)
		}
		spec := testSpec()
		spec.Tier, spec.MaxPriceMicrosPerGPUHour, spec.GPUModels = idlegrid.TierBronze, 600_000, []string{"NO-SUCH-GPU"}
		j, err := m.srv.SubmitJob(poorCtx, spec)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		l := &idlegrid.Lease{ID: idlegrid.NewID("lease"), NodeID: m.nodeID, GPUUUIDs: []string{"GPU-barn-1-0", "GPU-barn-1-1"},
			PriceMicrosPerGPUHour: 500_000, LimitSeconds: 3600, HoldMicros: 10_000, NoticeSeconds: 120, Reason: "placed by hand"}
		mustPlaceByHand(t, m, j, l)
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
			t.Fatal(err)
		}
		// $1/h for 120 s of notice and 120 s of margin is $0.0667; the
		// renter has $0.02 in all.
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		got, _, _ := m.srv.FindLease(poorCtx, l.ID)
		if !strings.HasPrefix(got.StopRequested, "notice: balance running out") {
			t.Fatalf("lease stop = %q, want a notice that the balance runs out", got.StopRequested)
		}
		notices, _ := m.srv.ListNotices(poorCtx, idlegrid.NoticeFilter{})
		if len(notices) != 1 || notices[0].Kind != idlegrid.NoticeRunout {
			t.Fatalf("notices = %+v, want one runout notice", notices)
		}
		if others, _ := m.srv.ListNotices(m.renter, idlegrid.NoticeFilter{}); len(others) != 0 {
			t.Fatalf("the rich renter got notices: %+v", others)
		}
		m.advance(t, 20*time.Second)
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeasePreempted}); err != nil {
			t.Fatal(err)
		}
		ended, _, _ := m.srv.FindLease(poorCtx, l.ID)
		if billed := mustSettlement(t, m, l.ID).GPUSeconds; ended.State != idlegrid.LeasePreempted || billed <= 0 || billed > 2*20 ||
			ended.ChargedMicros != idlegrid.CostOf(500_000, billed) {
			t.Fatalf("lease = %s charged %s for %d GPU-s, want preempted, charged for at most the 20 s it ran on 2 GPUs", ended.State, ended.ChargedMicros, billed)
		}
		if b := mustBalance(t, poorCtx, m.srv); b.Held != 0 || b.Available != 20_000-ended.ChargedMicros {
			t.Fatalf("renter balance %+v after the lease", b)
		}
		mustLedgerBalanced(t, m.store)
	})
}

func TestServer_Statement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		l, n := mustStarted(t, m, j)
		if n != m.node {
			t.Fatalf("lease placed on %s, want barn-1, the cheaper node", l.NodeID)
		}
		m.advance(t, 90*time.Second)
		mustSendReceipts(t, m, l.ID, 60, 30) // two signed intervals, 2 GPUs: 180 GPU-s
		code := 0
		if err := m.srv.ReportLease(n, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
			t.Fatal(err)
		}
		l = mustFindLease(t, m, l.ID)
		month := m.srv.Now().Format("2006-01")
		rs, err := m.srv.Statement(m.renter, "", month)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.Lines) != 1 {
			t.Fatalf("renter statement lines %+v, want one", rs.Lines)
		}
		line, billed := rs.Lines[0], mustSettlement(t, m, l.ID).GPUSeconds
		if line.JobID != l.JobID || line.GPUSeconds != billed || line.GPUHours != idlegrid.GPUHours(billed) || billed <= 0 ||
			line.PriceMicrosPerGPUHour != l.PriceMicrosPerGPUHour || line.ChargedMicros != l.ChargedMicros ||
			line.ChargedMicros != idlegrid.CostOf(line.PriceMicrosPerGPUHour, line.GPUSeconds) {
			t.Fatalf("renter line %+v, want job %s, %d GPU-s at %s for %s", line, l.JobID, billed, l.PriceMicrosPerGPUHour, l.ChargedMicros)
		}
		ps, err := m.srv.Statement(m.provider, "", month)
		if err != nil {
			t.Fatal(err)
		}
		fee := l.ChargedMicros / 10
		if len(ps.Lines) != 1 || ps.Lines[0].NodeID != l.NodeID || ps.Lines[0].EarningsMicros != l.ChargedMicros-fee ||
			ps.Lines[0].FeesMicros != fee || ps.Lines[0].GPUSeconds != billed {
			t.Fatalf("provider lines %+v", ps.Lines)
		}
		// Both sides reconcile their statement with the signed receipts of
		// the lease, which anyone can verify without the server.
		for _, who := range []context.Context{m.renter, m.provider} {
			export, err := m.srv.LeaseReceipts(who, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for _, r := range export.Receipts {
				sum += r.GPUSeconds
			}
			if len(export.Receipts) == 0 || sum != rs.Lines[0].GPUSeconds || sum != ps.Lines[0].GPUSeconds {
				t.Fatalf("receipts sum to %d GPU-s over %d receipts; statements say renter %d, provider %d",
					sum, len(export.Receipts), rs.Lines[0].GPUSeconds, ps.Lines[0].GPUSeconds)
			}
		}
		// Metered inference requests on the same node are on both
		// statements too, and in their totals.
		u := &idlegrid.InferenceUsage{ID: "req_1", RenterID: m.renterID, KeyID: "key_1", ProviderID: l.ProviderID, NodeID: l.NodeID,
			Model: "llama-8b", Endpoint: "chat/completions", InputTokens: 1000, OutputTokens: 500, Source: idlegrid.UsageUpstream,
			ChargeMicros: 2_000, Status: 200, CreatedAt: m.srv.Now()}
		var tr *idlegrid.Transfer
		u.FeeMicros, tr = ledger.Rules{FeeBasisPoints: 1000}.Inference(u, u.CreatedAt)
		for _, err := range m.store.RecordInference(context.Background(), []idlegrid.InferenceCharge{{Usage: u, Transfer: tr}}) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if rs, err = m.srv.Statement(m.renter, "", month); err != nil {
			t.Fatal(err)
		}
		want := idlegrid.InferenceTotal{Model: "llama-8b", Requests: 1, InputTokens: 1000, OutputTokens: 500, ChargedMicros: 2_000}
		if len(rs.Inference) != 1 || rs.Inference[0] != want || rs.Total.Requests != 1 || rs.Total.ChargedMicros != l.ChargedMicros+2_000 {
			t.Fatalf("renter's inference %+v, total %+v; want %+v and the lease's charge and the request's", rs.Inference, rs.Total, want)
		}
		if ps, err = m.srv.Statement(m.provider, "", month); err != nil {
			t.Fatal(err)
		}
		want.NodeID, want.NodeName, want.FeesMicros, want.EarningsMicros = l.NodeID, "barn-1", 200, 1_800
		if len(ps.Inference) != 1 || ps.Inference[0] != want || ps.Total.EarningsMicros != l.ChargedMicros-fee+1_800 {
			t.Fatalf("provider's inference %+v, total %+v; want %+v", ps.Inference, ps.Total, want)
		}

		next, _ := time.Parse("2006-01", month)
		if empty, err := m.srv.Statement(m.renter, "", next.AddDate(0, 1, 0).Format("2006-01")); err != nil || len(empty.Lines) != 0 {
			t.Fatalf("next month's statement = %+v (%v), want empty", empty, err)
		}
		_, err = m.srv.Statement(m.admin, "", month)
		wantCode(t, err, idlegrid.EINVALID)
		if _, err := m.srv.Statement(m.admin, m.renterID, month); err != nil {
			t.Fatal(err)
		}
		_, err = m.srv.Statement(m.renter, "", "November")
		wantCode(t, err, idlegrid.EINVALID)
	})
}

// A renter whose money covers what its live leases would cost to their
// time limits is safe from running out: the check does not read its
// leases (Store.LiveLeaseCosts).
func TestServer_RunoutReadsOnlyUncovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reads := &leaseReads{}
		m := mustMoneyMarketOn(t, func(s idlegrid.Store) idlegrid.Store { reads.Store = s; return reads })
		ctx := context.Background()
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if live, err := m.store.ListLeases(ctx, idlegrid.LeaseFilter{JobID: j.ID}); err != nil || len(live) != 1 {
			t.Fatalf("leases of the job = %d (%v), want 1", len(live), err)
		}
		reads.reset()
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if got := reads.of(m.renterID); got != 0 {
			t.Fatalf("the reaper read the covered renter's leases %d times, want none", got)
		}
	})
}

// leaseReads is a store that counts the lease listings of each renter.
type leaseReads struct {
	idlegrid.Store
	mu       sync.Mutex
	byRenter map[string]int
}

func (s *leaseReads) ListLeases(ctx context.Context, f idlegrid.LeaseFilter) ([]*idlegrid.Lease, error) {
	s.mu.Lock()
	if s.byRenter == nil {
		s.byRenter = map[string]int{}
	}
	s.byRenter[f.RenterID]++
	s.mu.Unlock()
	return s.Store.ListLeases(ctx, f)
}

func (s *leaseReads) reset() { s.mu.Lock(); clear(s.byRenter); s.mu.Unlock() }

func (s *leaseReads) of(renterID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byRenter[renterID]
}

// TestServer_TransfersShowOnlyYours: a batch of metered inference is one
// transfer for many renters and providers, so each account holder sees its
// own entries and the rest summed as others; admins see every entry.
func TestServer_TransfersShowOnlyYours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		other, _, _, err := m.srv.CreateAccount(m.admin, "rival", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.srv.TopUp(m.admin, other.ID, 10*idlegrid.MicrosPerUnit, "topup-rival"); err != nil {
			t.Fatal(err)
		}
		providerID := idlegrid.CallerFromContext(m.provider).AccountID
		var charges []idlegrid.InferenceCharge
		for i, renter := range []string{m.renterID, other.ID} {
			u := &idlegrid.InferenceUsage{ID: fmt.Sprintf("req_%d", i), RenterID: renter, KeyID: "key_1", ProviderID: providerID, NodeID: m.nodeID,
				Model: "llama-8b", Endpoint: "chat/completions", InputTokens: 1000, OutputTokens: 500, Source: idlegrid.UsageUpstream,
				ChargeMicros: idlegrid.Micros(2_000 * (i + 1)), Status: 200, CreatedAt: m.srv.Now()}
			var tr *idlegrid.Transfer
			u.FeeMicros, tr = ledger.Rules{FeeBasisPoints: 1000}.Inference(u, u.CreatedAt)
			charges = append(charges, idlegrid.InferenceCharge{Usage: u, Transfer: tr})
		}
		for _, err := range m.store.RecordInference(context.Background(), charges) {
			if err != nil {
				t.Fatal(err)
			}
		}
		seen := func(who context.Context, accountID string) *idlegrid.Transfer {
			t.Helper()
			ts, err := m.srv.ListTransfers(who, idlegrid.TransferFilter{AccountID: accountID})
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range ts {
				if tr.Kind == idlegrid.TransferInference {
					return tr
				}
			}
			t.Fatalf("transfers = %+v, want the inference batch among them", ts)
			return nil
		}
		for _, tt := range []struct {
			who      context.Context
			id       string
			want     map[idlegrid.LedgerAccount]idlegrid.Micros
			wantSeen string
		}{
			{m.renter, m.renterID, map[idlegrid.LedgerAccount]idlegrid.Micros{idlegrid.RenterAvailable(m.renterID): -2_000, idlegrid.OtherAccounts: 2_000}, "renter"},
			{m.provider, providerID, map[idlegrid.LedgerAccount]idlegrid.Micros{idlegrid.ProviderPending(providerID): 5_400, idlegrid.OtherAccounts: -5_400}, "provider"},
		} {
			got := map[idlegrid.LedgerAccount]idlegrid.Micros{}
			for _, e := range seen(tt.who, "").Entries {
				got[e.Account] += e.Amount
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("the %s sees %v, want %v", tt.wantSeen, got, tt.want)
			}
		}
		all := seen(m.admin, m.renterID)
		if !slices.ContainsFunc(all.Entries, func(e idlegrid.Entry) bool { return e.Account == idlegrid.RenterAvailable(other.ID) }) {
			t.Errorf("the admin sees %+v, want every entry", all.Entries)
		}
	})
}
