package sqlstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// moneyTests are the contract tests of payouts, maturing, spend limits,
// notices and settlements; runStoreTests runs them with the rest.
var moneyTests = []struct {
	name string
	test func(t *testing.T, db *sqlstore.DB)
}{
	{"ListMaturing", testListMaturing},
	{"LeaseRefunds", testLeaseRefunds},
	{"Payouts", testPayouts},
	{"SpendLimits", testSpendLimits},
	{"SpendLimits_PlaceJob", testSpendLimitsPlaceJob},
	{"SpendLimits_Inference", testSpendLimitsInference},
	{"SpendLimits_Refunds", testSpendLimitsRefunds},
	{"Notices", testNotices},
	{"Settlements", testSettlements},
	{"Money_Property", testMoneyProperty},
}

// mustSettled places a one-GPU lease of a new job of renter on n, runs it
// from at(2m) and settles it at at(2m)+ran, charging the locked price for
// what ran with the suite's 10% fee. It returns the lease and its
// settlement transfer.
func mustSettled(tb testing.TB, db *sqlstore.DB, renterID string, n *idlegrid.Node, gpu int, ran time.Duration) (*idlegrid.Lease, *idlegrid.Transfer) {
	tb.Helper()
	return mustSettledJob(tb, db, mustJob(tb, db, renterID, 1, 1), n, gpu, ran)
}

// mustSettledJob is mustSettled of job j, stored.
func mustSettledJob(tb testing.TB, db *sqlstore.DB, j *idlegrid.Job, n *idlegrid.Node, gpu int, ran time.Duration) (*idlegrid.Lease, *idlegrid.Transfer) {
	tb.Helper()
	l := lease(j, n, gpu)
	mustPlace(tb, db, placement(j, 0, l))
	start(tb, db, l)
	l, err := db.FindLease(context.Background(), l.ID)
	mustOK(tb, err)
	end := at(2*time.Minute + ran)
	charge, x := (ledger.Rules{FeeBasisPoints: 1000}).Settle(l, l.GPUSeconds(end), idlegrid.FaultNone, end)
	mustTransition(tb, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseSucceeded, Reason: "exited 0", ChargedMicros: charge, At: end}, x)
	return l, x
}

func testListMaturing(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, p := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleProvider)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	n := mustNode(t, db, p.ID, 2)
	_, s1 := mustSettled(t, db, r.ID, n, 0, 30*time.Minute)
	_, s2 := mustSettled(t, db, r.ID, n, 1, 45*time.Minute)

	keys := func(ts []*idlegrid.Transfer) (out []string) {
		for _, x := range ts {
			out = append(out, x.IdempotencyKey)
		}
		return out
	}
	got, err := db.ListMaturing(ctx, at(40*time.Minute), 10)
	mustOK(t, err)
	if diff := cmp.Diff([]string{s1.IdempotencyKey}, keys(got)); diff != "" {
		t.Errorf("maturing by 40m (-want +got):\n%s", diff)
	}
	got, err = db.ListMaturing(ctx, at(time.Hour), 10)
	mustOK(t, err)
	if diff := cmp.Diff([]string{s1.IdempotencyKey, s2.IdempotencyKey}, keys(got)); diff != "" {
		t.Errorf("maturing by 1h (-want +got):\n%s", diff)
	}
	if got[0].GPUSeconds != 1800 {
		t.Errorf("settlement billed %d GPU-s, want 1800", got[0].GPUSeconds)
	}

	m := ledger.Mature(got[0], 0, at(time.Hour))
	_, err = db.PostTransfer(ctx, m)
	mustOK(t, err)
	_, err = db.PostTransfer(ctx, ledger.Mature(got[0], 0, at(2*time.Hour))) // a second pass finds it matured
	mustOK(t, err)
	checkLedger(t, db)
	got, err = db.ListMaturing(ctx, at(time.Hour), 10)
	mustOK(t, err)
	if diff := cmp.Diff([]string{s2.IdempotencyKey}, keys(got)); diff != "" {
		t.Errorf("after maturing one (-want +got):\n%s", diff)
	}
	earned1, earned2 := s1.Entries[1].Amount, s2.Entries[1].Amount
	if b := mustBalance(t, db, p.ID); b.Payable != earned1 || b.Pending != earned2 {
		t.Errorf("provider payable %s pending %s, want %s and %s", b.Payable, b.Pending, earned1, earned2)
	}

	// The provider's earnings from metered inference mature as a
	// settlement's do, a batch of charges at once.
	batch := []idlegrid.InferenceCharge{chargeOf(r.ID, p.ID, id("req"), "k", 1000, at(2*time.Hour)),
		chargeOf(r.ID, p.ID, id("req"), "k", 2000, at(2*time.Hour))}
	for _, err := range db.RecordInference(ctx, batch) {
		mustOK(t, err)
	}
	got, err = db.ListMaturing(ctx, at(3*time.Hour), 10)
	mustOK(t, err)
	if len(got) != 2 || got[0].IdempotencyKey != s2.IdempotencyKey || got[1].Kind != idlegrid.TransferInference {
		t.Fatalf("maturing by 3h: %v, want %s and the inference posting", keys(got), s2.IdempotencyKey)
	}
	for _, st := range got {
		_, err = db.PostTransfer(ctx, ledger.Mature(st, 0, at(3*time.Hour)))
		mustOK(t, err)
	}
	checkLedger(t, db)
	inference := batch[0].Usage.ChargeMicros - batch[0].Usage.FeeMicros + batch[1].Usage.ChargeMicros - batch[1].Usage.FeeMicros
	if b := mustBalance(t, db, p.ID); b.Pending != 0 || b.Payable != earned1+earned2+inference {
		t.Errorf("provider payable %s pending %s, want %s and none", b.Payable, b.Pending, earned1+earned2+inference)
	}
	if got, err = db.ListMaturing(ctx, at(3*time.Hour), 10); err != nil || len(got) != 0 {
		t.Errorf("maturing after all matured: %v (%v), want none", keys(got), err)
	}
}

// mustPayable credits amount to a provider's payable account directly.
func mustPayable(tb testing.TB, db *sqlstore.DB, providerID string, amount idlegrid.Micros) {
	tb.Helper()
	_, err := db.PostTransfer(context.Background(), &idlegrid.Transfer{IdempotencyKey: id("credit"), Kind: idlegrid.TransferMature,
		CreatedAt: t0, Entries: []idlegrid.Entry{
			{Account: idlegrid.WorldAccount, Amount: -amount}, {Account: idlegrid.ProviderPayable(providerID), Amount: amount}}})
	mustOK(tb, err)
}

func newPayout(tb testing.TB, providerID string, amount idlegrid.Micros, key string) (*idlegrid.Payout, *idlegrid.Transfer) {
	tb.Helper()
	p := &idlegrid.Payout{ID: id("payout"), ProviderID: providerID, AmountMicros: amount, IdempotencyKey: key, CreatedAt: t0}
	x, err := ledger.RequestPayout(p, t0)
	mustOK(tb, err)
	return p, x
}

func testPayouts(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	prov := mustAccount(t, db, idlegrid.RoleProvider)
	mustPayable(t, db, prov.ID, 10*idlegrid.MicrosPerUnit)

	p1, x1 := newPayout(t, prov.ID, 4*idlegrid.MicrosPerUnit, "k1")
	got, err := db.CreatePayout(ctx, p1, x1)
	mustOK(t, err)
	checkLedger(t, db)
	if got.ID != p1.ID || got.State != idlegrid.PayoutRequested || got.AmountMicros != p1.AmountMicros {
		t.Fatalf("created %+v", got)
	}
	if b := mustBalance(t, db, prov.ID); b.Payable != 6*idlegrid.MicrosPerUnit || b.PayoutInFlight != 4*idlegrid.MicrosPerUnit {
		t.Errorf("after request: payable %s in flight %s, want $6 and $4", b.Payable, b.PayoutInFlight)
	}

	t.Run("Replay", func(t *testing.T) {
		again, ax := newPayout(t, prov.ID, 4*idlegrid.MicrosPerUnit, "k1")
		stored, err := db.CreatePayout(ctx, again, ax)
		mustOK(t, err)
		if stored.ID != p1.ID {
			t.Errorf("replay made payout %s, want the stored %s", stored.ID, p1.ID)
		}
		other, ox := newPayout(t, prov.ID, 5*idlegrid.MicrosPerUnit, "k1")
		_, err = db.CreatePayout(ctx, other, ox)
		wantCode(t, err, idlegrid.ECONFLICT)
		if b := mustBalance(t, db, prov.ID); b.PayoutInFlight != 4*idlegrid.MicrosPerUnit {
			t.Errorf("in flight %s after replays, want $4", b.PayoutInFlight)
		}
	})
	t.Run("Short", func(t *testing.T) {
		big, bx := newPayout(t, prov.ID, 7*idlegrid.MicrosPerUnit, "k-big")
		_, err := db.CreatePayout(ctx, big, bx)
		wantCode(t, err, idlegrid.EPAYMENT)
		_, err = db.FindPayout(ctx, big.ID)
		wantCode(t, err, idlegrid.ENOTFOUND)
		checkLedger(t, db)
	})
	t.Run("Settle", func(t *testing.T) {
		x, err := ledger.ResolvePayout(got, idlegrid.PayoutSettled, at(time.Hour))
		mustOK(t, err)
		r := &idlegrid.PayoutResolution{PayoutID: p1.ID, To: idlegrid.PayoutSettled, Reason: "wire 123",
			IdempotencyKey: "op-1", By: "acct_ops", At: at(time.Hour)}
		done, err := db.ResolvePayout(ctx, r, x)
		mustOK(t, err)
		checkLedger(t, db)
		if done.State != idlegrid.PayoutSettled || done.Reason != "wire 123" || done.ResolvedBy != "acct_ops" ||
			done.ResolvedAt == nil || !done.ResolvedAt.Equal(at(time.Hour)) || done.ResolutionKey != "op-1" {
			t.Errorf("settled payout %+v", done)
		}
		x2, _ := ledger.ResolvePayout(got, idlegrid.PayoutSettled, at(2*time.Hour))
		again, err := db.ResolvePayout(ctx, r, x2) // a retry: nothing moves
		mustOK(t, err)
		if diff := cmp.Diff(done, again); diff != "" {
			t.Errorf("replayed resolution (-want +got):\n%s", diff)
		}
		x3, _ := ledger.ResolvePayout(got, idlegrid.PayoutRejected, at(2*time.Hour))
		_, err = db.ResolvePayout(ctx, &idlegrid.PayoutResolution{PayoutID: p1.ID, To: idlegrid.PayoutRejected,
			IdempotencyKey: "op-2", At: at(2 * time.Hour)}, x3)
		wantCode(t, err, idlegrid.ECONFLICT)
		if b := mustBalance(t, db, prov.ID); b.PayoutInFlight != 0 || b.PaidOut != 4*idlegrid.MicrosPerUnit || b.Payable != 6*idlegrid.MicrosPerUnit {
			t.Errorf("after settle: %+v, want in flight $0, paid out $4, payable $6", b)
		}
		checkLedger(t, db)
	})
	t.Run("Reject", func(t *testing.T) {
		p2, x := newPayout(t, prov.ID, 2*idlegrid.MicrosPerUnit, "k2")
		p2, err := db.CreatePayout(ctx, p2, x)
		mustOK(t, err)
		rx, err := ledger.ResolvePayout(p2, idlegrid.PayoutRejected, at(time.Hour))
		mustOK(t, err)
		done, err := db.ResolvePayout(ctx, &idlegrid.PayoutResolution{PayoutID: p2.ID, To: idlegrid.PayoutRejected,
			Reason: "bank details missing", IdempotencyKey: "op-3", By: "acct_ops", At: at(time.Hour)}, rx)
		mustOK(t, err)
		if done.State != idlegrid.PayoutRejected {
			t.Errorf("state %s, want rejected", done.State)
		}
		if b := mustBalance(t, db, prov.ID); b.Payable != 6*idlegrid.MicrosPerUnit || b.PayoutInFlight != 0 {
			t.Errorf("after reject: %+v, want payable $6 again", b)
		}
		checkLedger(t, db)
	})
	t.Run("List", func(t *testing.T) {
		all, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{ProviderID: prov.ID})
		mustOK(t, err)
		if len(all) != 2 {
			t.Fatalf("%d payouts, want 2", len(all))
		}
		settled, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{States: []idlegrid.PayoutState{idlegrid.PayoutSettled}})
		mustOK(t, err)
		if len(settled) != 1 || settled[0].ID != p1.ID {
			t.Errorf("settled payouts %+v, want only %s", settled, p1.ID)
		}
		first, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{ProviderID: prov.ID, Limit: 1})
		mustOK(t, err)
		rest, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{ProviderID: prov.ID, Before: first[0].ID})
		mustOK(t, err)
		if diff := cmp.Diff(all, append(first, rest...)); diff != "" {
			t.Errorf("ListPayouts a page at a time (-all +paged):\n%s", diff)
		}
		oldest, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{ProviderID: prov.ID, OldestFirst: true})
		mustOK(t, err)
		if diff := cmp.Diff([]*idlegrid.Payout{all[1], all[0]}, oldest); diff != "" {
			t.Errorf("ListPayouts oldest first (-want +got):\n%s", diff)
		}
		next, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{ProviderID: prov.ID, OldestFirst: true, After: oldest[0].ID})
		mustOK(t, err)
		if diff := cmp.Diff(oldest[1:], next); diff != "" {
			t.Errorf("ListPayouts oldest first after the first (-want +got):\n%s", diff)
		}
		none, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{ProviderID: "acct_missing"})
		mustOK(t, err)
		if len(none) != 0 {
			t.Errorf("another provider's payouts: %+v", none)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		x, _ := ledger.ResolvePayout(&idlegrid.Payout{ID: "payout_missing", ProviderID: prov.ID, AmountMicros: 1,
			State: idlegrid.PayoutRequested}, idlegrid.PayoutSettled, t0)
		_, err := db.ResolvePayout(ctx, &idlegrid.PayoutResolution{PayoutID: "payout_missing", To: idlegrid.PayoutSettled,
			IdempotencyKey: "k", At: t0}, x)
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
}

func testSpendLimits(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	k := &idlegrid.APIKey{ID: id("key"), AccountID: r.ID, Name: "ci", Prefix: "igk_x", Hash: id("hash"), CreatedAt: t0}
	mustOK(t, db.CreateAPIKey(ctx, k))
	acct := &idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: r.ID, LimitMicros: 50, SetBy: "acct_ops", UpdatedAt: t0}
	key := &idlegrid.SpendLimit{Scope: idlegrid.SpendKey, AccountID: r.ID, KeyID: k.ID, LimitMicros: 20, SetBy: r.ID, UpdatedAt: t0}
	mustOK(t, db.SetSpendLimit(ctx, acct))
	mustOK(t, db.SetSpendLimit(ctx, key))
	acct.LimitMicros = 60
	mustOK(t, db.SetSpendLimit(ctx, acct)) // replaces
	got, err := db.ListSpendLimits(ctx, r.ID)
	mustOK(t, err)
	if diff := cmp.Diff([]*idlegrid.SpendLimit{acct, key}, got); diff != "" {
		t.Errorf("ListSpendLimits (-want +got):\n%s", diff)
	}
	wantCode(t, db.SetSpendLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendKey, AccountID: r.ID, KeyID: "key_missing",
		LimitMicros: 1, UpdatedAt: t0}), idlegrid.ENOTFOUND)
	wantCode(t, db.SetSpendLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: r.ID,
		LimitMicros: -1, UpdatedAt: t0}), idlegrid.EINVALID)
	mustOK(t, db.RemoveSpendLimit(ctx, idlegrid.SpendKey, r.ID, k.ID))
	mustOK(t, db.RemoveSpendLimit(ctx, idlegrid.SpendKey, r.ID, k.ID)) // already gone
	got, err = db.ListSpendLimits(ctx, r.ID)
	mustOK(t, err)
	if len(got) != 1 || got[0].Scope != idlegrid.SpendAccount {
		t.Errorf("limits after removing the key's: %+v", got)
	}
}

// mustKeyedRenter makes a renter with $100, a provider with a node of 4
// GPUs and an API key of the renter's; keyJob stores a new job of one GPU
// the key submits.
func mustKeyedRenter(t *testing.T, db *sqlstore.DB) (r, p *idlegrid.Account, n *idlegrid.Node, k *idlegrid.APIKey, keyJob func() *idlegrid.Job) {
	t.Helper()
	ctx := context.Background()
	r, p = mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleProvider)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	n = mustNode(t, db, p.ID, 4)
	k = &idlegrid.APIKey{ID: id("key"), AccountID: r.ID, Name: "ci", Prefix: "igk_x", Hash: id("hash"), CreatedAt: t0}
	mustOK(t, db.CreateAPIKey(ctx, k))
	return r, p, n, k, func() *idlegrid.Job {
		j := newJob(r.ID, 1, 1)
		j.SubmittedByKey = k.ID
		mustOK(t, db.CreateJob(ctx, j))
		return j
	}
}

func testSpendLimitsPlaceJob(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, _, n, k, keyJob := mustKeyedRenter(t, db)

	// A ran-and-settled lease: 30 minutes at $2 charged $1 this month.
	settled, _ := mustSettled(t, db, r.ID, n, 0, 30*time.Minute)
	month := idlegrid.SpendFilter{AccountID: r.ID, From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	s, err := db.MonthSpend(ctx, month)
	mustOK(t, err)
	if s.ChargedMicros != idlegrid.MicrosPerUnit || s.HeldMicros != 0 {
		t.Errorf("spend after one lease: %+v, want $1 charged", s)
	}
	_ = settled

	// The key may spend $3 a month: one $2 hold fits, a second does not.
	mustOK(t, db.SetSpendLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendKey, AccountID: r.ID, KeyID: k.ID,
		LimitMicros: 3 * idlegrid.MicrosPerUnit, UpdatedAt: t0}))
	j1 := keyJob()
	mustPlace(t, db, placement(j1, 0, lease(j1, n, 1)))
	j2 := keyJob()
	err = db.PlaceJob(ctx, placement(j2, 0, lease(j2, n, 2)))
	wantCode(t, err, idlegrid.EPAYMENT)
	if want := "spend limit of API key " + k.ID + " would be exceeded ($1.000000 left)"; !strings.Contains(idlegrid.ErrorMessage(err), want) {
		t.Errorf("message %q, want it to contain %q", idlegrid.ErrorMessage(err), want)
	}
	mustJobState(t, db, j2.ID, idlegrid.JobQueued, "")
	checkLedger(t, db)
	month.KeyID = k.ID
	s, err = db.MonthSpend(ctx, month)
	mustOK(t, err)
	if s.ChargedMicros != 0 || s.HeldMicros != 2*idlegrid.MicrosPerUnit {
		t.Errorf("key spend %+v, want $2 held and nothing charged (the settled lease was not the key's)", s)
	}

	// Jobs without the key are held to the account's limit only: $4 with
	// $1 charged and $2 held leaves room for nothing more of $2.
	// At $3, what was used comes to the limit: it is reached.
	j3 := mustJob(t, db, r.ID, 1, 1)
	mustOK(t, db.SetSpendLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: r.ID,
		LimitMicros: 3 * idlegrid.MicrosPerUnit, UpdatedAt: t0}))
	err = db.PlaceJob(ctx, placement(j3, 0, lease(j3, n, 2)))
	if want := "spend limit of account " + r.ID + " reached: "; !strings.Contains(idlegrid.ErrorMessage(err), want) {
		t.Errorf("at the limit: %v, want it to contain %q", err, want)
	}
	mustOK(t, db.SetSpendLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: r.ID,
		LimitMicros: 4 * idlegrid.MicrosPerUnit, UpdatedAt: t0}))
	wantCode(t, db.PlaceJob(ctx, placement(j3, 0, lease(j3, n, 2))), idlegrid.EPAYMENT)
	mustOK(t, db.RemoveSpendLimit(ctx, idlegrid.SpendAccount, r.ID, ""))
	mustPlace(t, db, placement(j3, 0, lease(j3, n, 2)))

	// Next month the charges of this one no longer count.
	next := idlegrid.SpendFilter{AccountID: r.ID, From: month.To, To: month.To.AddDate(0, 1, 0)}
	s, err = db.MonthSpend(ctx, next)
	mustOK(t, err)
	if s.ChargedMicros != 0 || s.HeldMicros != 4*idlegrid.MicrosPerUnit {
		t.Errorf("next month's spend %+v, want only the $4 held now", s)
	}
}

// testSpendLimitsRefunds: what an upheld dispute refunds of a lease's
// charge (of the provider's earnings and the platform's fee) comes off the
// spend of the month the lease was charged in, the account's and its
// key's, whether the dispute is upheld as it opens or later, so that the
// limits have that headroom again; the balance's all-time spent stays what
// was charged. The migration that added refunds counts those before it.
func testSpendLimitsRefunds(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, p, n, k, keyJob := mustKeyedRenter(t, db)
	// Two leases of the key's, 30 minutes at $2 each: $2 charged in November.
	l1, _ := mustSettledJob(t, db, keyJob(), n, 0, 30*time.Minute)
	l2, _ := mustSettledJob(t, db, keyJob(), n, 1, 30*time.Minute)
	refund := func(l *idlegrid.Lease, disputeID string, earnings, fee idlegrid.Micros, when time.Time) *idlegrid.Transfer {
		tr, err := ledger.Refund(nil, p.ID, r.ID, l.ID, disputeID, "mismatched_result", earnings, when)
		mustOK(t, err)
		if fee > 0 {
			tr, err = ledger.RefundFee(tr, r.ID, l.ID, disputeID, "mismatched_result", fee, when)
			mustOK(t, err)
		}
		tr.ID = id("tx")
		return tr
	}
	november := idlegrid.SpendFilter{AccountID: r.ID, From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	december := idlegrid.SpendFilter{AccountID: r.ID, From: november.To, To: november.To.AddDate(0, 1, 0)}
	check := func(when string, charged, refunded idlegrid.Micros) {
		t.Helper()
		for _, f := range []idlegrid.SpendFilter{november, {AccountID: r.ID, KeyID: k.ID, From: november.From, To: november.To}} {
			s, err := db.MonthSpend(ctx, f)
			mustOK(t, err)
			if s.ChargedMicros != charged || s.RefundedMicros != refunded {
				t.Errorf("%s: November's spend of key %q = %+v, want %s charged net of %s refunded", when, f.KeyID, s, charged, refunded)
			}
		}
		if s, err := db.MonthSpend(ctx, december); err != nil || s.ChargedMicros != 0 || s.RefundedMicros != 0 {
			t.Errorf("%s: December's spend %+v (%v), want none: the refunds count in the leases' month", when, s, err)
		}
		if b := mustBalance(t, db, r.ID); b.Spent != 2*idlegrid.MicrosPerUnit {
			t.Errorf("%s: spent in all %s, want the $2 charged", when, b.Spent)
		}
	}
	check("as charged", 2*idlegrid.MicrosPerUnit, 0)

	// Upheld as it opens, in December: $0.30 of earnings and $0.04 of fee.
	d1 := &idlegrid.Dispute{ID: id("dispute"), Offence: "mismatched_result", State: idlegrid.DisputeUpheld, ProviderID: p.ID,
		LeaseID: l1.ID, RenterID: r.ID, Evidence: "the re-runs agree on another output", HarmMicros: l1.ChargedMicros, CreatedAt: at(13 * time.Hour)}
	mustOK(t, db.OpenDispute(ctx, d1, refund(l1, d1.ID, 300_000, 40_000, d1.CreatedAt), nil))
	check("after a dispute upheld as it opened", 2*idlegrid.MicrosPerUnit-340_000, 340_000)

	// Opened, then upheld: $0.50 of earnings.
	d2 := &idlegrid.Dispute{ID: id("dispute"), Offence: "mismatched_result", State: idlegrid.DisputeOpen, ProviderID: p.ID,
		LeaseID: l2.ID, RenterID: r.ID, Evidence: "the re-runs agree on another output", HarmMicros: l2.ChargedMicros, CreatedAt: at(13 * time.Hour)}
	mustOK(t, db.OpenDispute(ctx, d2, nil, nil))
	check("after a dispute opened", 2*idlegrid.MicrosPerUnit-340_000, 340_000)
	_, err := db.ResolveDispute(ctx, idlegrid.DisputeResolution{DisputeID: d2.ID, To: idlegrid.DisputeUpheld, Resolution: "logs agree",
		By: "acct_admin", Penalty: refund(l2, d2.ID, 500_000, 0, at(14*time.Hour)), PenaltyTo: r.ID, At: at(14 * time.Hour)})
	mustOK(t, err)
	check("after a dispute upheld later", 2*idlegrid.MicrosPerUnit-840_000, 840_000)
	checkLedger(t, db)

	// A key limit of $3.50 in November: the $0.84 refunded leaves room for
	// a $2 hold, which it would not without the refunds.
	mustOK(t, db.SetSpendLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendKey, AccountID: r.ID, KeyID: k.ID,
		LimitMicros: 3_500_000, UpdatedAt: t0}))
	j := keyJob()
	mustPlace(t, db, placement(j, 0, lease(j, n, 2)))

	mustOK(t, sqlstore.Remigrate(ctx, db, 42))
	check("after migrating again", 2*idlegrid.MicrosPerUnit-840_000, 840_000)
}

// testSpendLimitsInference: metered inference requests count in their
// month's spend, the account's and their key's, as lease charges do, so a
// spend limit covers both.
func testSpendLimitsInference(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, p := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleProvider)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	n := mustNode(t, db, p.ID, 4)
	for _, cs := range [][]idlegrid.InferenceCharge{
		{chargeOf(r.ID, p.ID, "req_1", "key_a", 2*idlegrid.MicrosPerUnit, at(time.Hour))},
		{chargeOf(r.ID, p.ID, "req_2", "key_b", idlegrid.MicrosPerUnit, at(time.Hour)),
			chargeOf(r.ID, p.ID, "req_3", "key_a", 5*idlegrid.MicrosPerUnit, at(13*time.Hour))}, // December
	} {
		for _, err := range db.RecordInference(ctx, cs) {
			mustOK(t, err)
		}
	}
	november := idlegrid.SpendFilter{AccountID: r.ID, From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	december := idlegrid.SpendFilter{AccountID: r.ID, From: november.To, To: november.To.AddDate(0, 1, 0)}
	check := func(when string) {
		t.Helper()
		for _, tt := range []struct {
			f    idlegrid.SpendFilter
			key  string
			want idlegrid.Micros
		}{
			{november, "", 3 * idlegrid.MicrosPerUnit},
			{november, "key_a", 2 * idlegrid.MicrosPerUnit},
			{november, "key_b", idlegrid.MicrosPerUnit},
			{december, "", 5 * idlegrid.MicrosPerUnit},
			{december, "key_b", 0},
		} {
			tt.f.KeyID = tt.key
			s, err := db.MonthSpend(ctx, tt.f)
			mustOK(t, err)
			if s.ChargedMicros != tt.want {
				t.Errorf("%s: charged in %s to key %q = %s, want %s", when, tt.f.From.Format("2006-01"), tt.key, s.ChargedMicros, tt.want)
			}
		}
		if b := mustBalance(t, db, r.ID); b.Spent != 8*idlegrid.MicrosPerUnit {
			t.Errorf("%s: spent in all %s, want $8", when, b.Spent)
		}
	}
	check("as recorded")

	// An account limit of $4 in November: $3 of inference leaves no room
	// for a $2 hold.
	mustOK(t, db.SetSpendLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: r.ID,
		LimitMicros: 4 * idlegrid.MicrosPerUnit, UpdatedAt: t0}))
	j := mustJob(t, db, r.ID, 1, 1)
	err := db.PlaceJob(ctx, placement(j, 0, lease(j, n, 2)))
	wantCode(t, err, idlegrid.EPAYMENT)
	if want := "$3.000000 charged"; !strings.Contains(idlegrid.ErrorMessage(err), want) {
		t.Errorf("message %q, want it to say %q", idlegrid.ErrorMessage(err), want)
	}

	_, err = db.MonthSpend(ctx, idlegrid.SpendFilter{AccountID: r.ID, From: november.From.Add(time.Hour), To: november.To})
	wantCode(t, err, idlegrid.EINVALID)

	// The migration that made the monthly spend counts what was charged
	// before it.
	mustOK(t, sqlstore.Remigrate(ctx, db, 19))
	check("after migrating again")
}

func testNotices(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	n1 := &idlegrid.Notice{ID: id("ntc"), AccountID: r.ID, Kind: idlegrid.NoticeRunout, Key: "runout:lease_1",
		LeaseID: "lease_1", JobID: "job_1", Message: "stopped", CreatedAt: t0}
	added, err := db.AddNotice(ctx, n1)
	mustOK(t, err)
	if !added {
		t.Error("first notice not added")
	}
	dup := *n1
	dup.ID, dup.CreatedAt = id("ntc"), at(time.Minute)
	if added, err := db.AddNotice(ctx, &dup); err != nil || added {
		t.Errorf("a notice with a key seen before: added %v, %v; want false, nil", added, err)
	}
	n2 := &idlegrid.Notice{ID: id("ntc"), AccountID: r.ID, Kind: idlegrid.NoticeSpendLimit, Key: "limit:lease_2",
		Message: "limit", CreatedAt: at(time.Hour)}
	_, err = db.AddNotice(ctx, n2)
	mustOK(t, err)
	got, err := db.ListNotices(ctx, idlegrid.NoticeFilter{AccountID: r.ID})
	mustOK(t, err)
	if diff := cmp.Diff([]*idlegrid.Notice{n2, n1}, got); diff != "" {
		t.Errorf("ListNotices (-want +got):\n%s", diff)
	}
	for _, page := range []struct {
		before string
		want   []*idlegrid.Notice
	}{{"", []*idlegrid.Notice{n2}}, {n2.ID, []*idlegrid.Notice{n1}}, {n1.ID, nil}} {
		got, err := db.ListNotices(ctx, idlegrid.NoticeFilter{AccountID: r.ID, Before: page.before, Limit: 1})
		mustOK(t, err)
		if diff := cmp.Diff(page.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ListNotices a page after %q (-want +got):\n%s", page.before, diff)
		}
	}
	other := mustAccount(t, db, idlegrid.RoleRenter)
	for _, before := range []string{n1.ID, "ntc_missing"} {
		_, err := db.ListNotices(ctx, idlegrid.NoticeFilter{AccountID: other.ID, Before: before})
		wantCode(t, err, idlegrid.EINVALID)
	}
	_, err = db.AddNotice(ctx, &idlegrid.Notice{ID: id("ntc"), AccountID: "acct_missing", Key: "x", Message: "m", CreatedAt: t0})
	wantCode(t, err, idlegrid.ENOTFOUND)
}

func testSettlements(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, p := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleProvider)
	other := mustAccount(t, db, idlegrid.RoleRenter)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	mustTopUp(t, db, other.ID, 100*idlegrid.MicrosPerUnit)
	n := mustNode(t, db, p.ID, 3)
	l1, _ := mustSettled(t, db, r.ID, n, 0, 30*time.Minute)
	mustSettled(t, db, other.ID, n, 1, 15*time.Minute)

	month := idlegrid.SettlementFilter{RenterID: r.ID, From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	got, err := db.ListSettlements(ctx, month)
	mustOK(t, err)
	if len(got) != 1 {
		t.Fatalf("%d settlements for the renter, want 1", len(got))
	}
	s := got[0]
	want := idlegrid.Settlement{LeaseID: l1.ID, JobID: l1.JobID, JobName: "train", RenterID: r.ID, ProviderID: p.ID,
		NodeID: n.ID, NodeName: n.Name, PriceMicrosPerGPUHour: price, GPUSeconds: 1800,
		ChargedMicros: idlegrid.MicrosPerUnit, EarningsMicros: 900_000, FeesMicros: 100_000, At: at(32 * time.Minute)}
	if diff := cmp.Diff(want, *s, cmpopts.IgnoreFields(idlegrid.Settlement{}, "TransferID")); diff != "" {
		t.Errorf("settlement (-want +got):\n%s", diff)
	}
	byProvider, err := db.ListSettlements(ctx, idlegrid.SettlementFilter{ProviderID: p.ID, From: month.From, To: month.To})
	mustOK(t, err)
	if len(byProvider) != 2 {
		t.Errorf("%d settlements for the provider, want 2", len(byProvider))
	}
	later, err := db.ListSettlements(ctx, idlegrid.SettlementFilter{RenterID: r.ID, From: month.To, To: month.To.AddDate(0, 1, 0)})
	mustOK(t, err)
	if len(later) != 0 {
		t.Errorf("December has %d settlements, want none", len(later))
	}
	_, err = db.ListSettlements(ctx, idlegrid.SettlementFilter{From: month.From, To: month.To})
	wantCode(t, err, idlegrid.EINVALID)
}
