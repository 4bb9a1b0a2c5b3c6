package server_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

func callerID(ctx context.Context) string { return idlegrid.CallerFromContext(ctx).AccountID }

// mustBond has the admin record a deposit of units as the market
// provider's bond.
func mustBond(t *testing.T, m *testMarket, units int64) {
	t.Helper()
	b, err := m.srv.PostBond(m.admin, callerID(m.provider), idlegrid.Micros(units)*idlegrid.MicrosPerUnit, "deposit-1")
	if err != nil {
		t.Fatal(err)
	} else if b.Bond != idlegrid.Micros(units)*idlegrid.MicrosPerUnit {
		t.Fatalf("bond = %s, want %d", b.Bond, units)
	}
}

func mustAccountBalance(t *testing.T, m *testMarket, accountID string) *idlegrid.Balance {
	t.Helper()
	b, err := m.store.Balance(context.Background(), accountID)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestServer_Bond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, trustpolicy.Default())
		mustBond(t, m, 100)
		// The same deposit retried moves nothing.
		if b, err := m.srv.PostBond(m.admin, callerID(m.provider), 100*idlegrid.MicrosPerUnit, "deposit-1"); err != nil || b.Bond != 100*idlegrid.MicrosPerUnit {
			t.Fatalf("retried deposit: bond %v, err %v; want 100 and no error", b, err)
		}
		for _, tt := range []struct {
			name string
			ctx  context.Context
			id   string
			code string
		}{
			{"a renter", m.renter, "", idlegrid.EFORBIDDEN},
			{"for another provider", m.provider, m.renterID, idlegrid.ENOTFOUND},
			{"beyond payable earnings", m.provider, "", idlegrid.EPAYMENT},
			{"an admin for a renter", m.admin, m.renterID, idlegrid.EINVALID},
		} {
			_, err := m.srv.PostBond(tt.ctx, tt.id, idlegrid.MicrosPerUnit, "k-"+tt.name)
			if got := idlegrid.ErrorCode(err); got != tt.code {
				t.Errorf("PostBond by %s: %v (%s), want %s", tt.name, err, got, tt.code)
			}
		}
		b, err := m.srv.ReleaseBond(m.provider, 40*idlegrid.MicrosPerUnit, "release-1")
		if err != nil {
			t.Fatal(err)
		} else if b.Bond != 60*idlegrid.MicrosPerUnit || b.Payable != 40*idlegrid.MicrosPerUnit {
			t.Errorf("after release: bond %s, payable %s; want 60 and 40", b.Bond, b.Payable)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// mustRunningBronze starts a bronze job on a market under the default
// trust policy whose provider has bonded 100, and runs it for d: its lease
// and the node running it.
func mustRunningBronze(t *testing.T, d time.Duration) (*testMarket, *idlegrid.Lease, context.Context) {
	t.Helper()
	m := mustMarketWith(t, trustpolicy.Default())
	mustBond(t, m, 100)
	spec := testSpec()
	spec.Tier = idlegrid.TierBronze
	l, node := mustRunningFor(t, m, spec, d)
	return m, l, node
}

// mustRunningFor submits spec on m, runs its lease, and lets d pass; it
// returns the lease and the node running it.
func mustRunningFor(t *testing.T, m *testMarket, spec idlegrid.JobSpec, d time.Duration) (*idlegrid.Lease, context.Context) {
	t.Helper()
	j, err := m.srv.SubmitJob(m.renter, spec)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	l, node := mustCommandFor(t, m, j.ID)
	if err := m.srv.ReportLease(node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatal(err)
	}
	m.advance(t, d)
	return l, node
}

func TestServer_BrokenNoticeSlashesBond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, l, node := mustRunningBronze(t, 30*time.Minute)

		// The node kills a bronze lease with no notice at all.
		if err := m.srv.ReportLease(node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "owner wanted the GPU"}); err != nil {
			t.Fatal(err)
		}
		ds, err := m.srv.ListDisputes(m.renter, idlegrid.DisputeFilter{})
		if err != nil {
			t.Fatal(err)
		} else if len(ds) != 1 {
			t.Fatalf("renter sees %d disputes, want 1", len(ds))
		}
		d := ds[0]
		// 30 minutes of 2 GPUs at the lease's price were thrown away: that
		// is the harm, and the policy takes all of it, up to 50.
		l = mustFindLease(t, m, l.ID)
		harm := idlegrid.CostOf(l.PriceMicrosPerGPUHour, 2*1800)
		want := min(harm, 50*idlegrid.MicrosPerUnit)
		if d.Offence != "broken_notice" || d.State != idlegrid.DisputeUpheld || d.LeaseID != l.ID ||
			d.HarmMicros != harm || d.PenaltyMicros != want || d.PenaltyTo != "renter" {
			t.Errorf("dispute = %+v, want broken_notice upheld for %s, harm %s, penalty %s to the renter", d, l.ID, harm, want)
		}
		ts, err := m.store.ListTransfers(context.Background(), idlegrid.TransferFilter{
			AccountID: m.renterID, Kinds: []idlegrid.TransferKind{idlegrid.TransferPenalty}})
		if err != nil {
			t.Fatal(err)
		} else if len(ts) != 1 || ts[0].ID != d.TransferID || !paysTo(ts[0], idlegrid.RenterAvailable(m.renterID), want) {
			t.Errorf("penalty transfers = %+v, want %s to the renter's available balance", ts, want)
		}
		if got := mustAccountBalance(t, m, callerID(m.provider)).Bond; got != 100*idlegrid.MicrosPerUnit-want {
			t.Errorf("bond = %s, want 100 less %s", got, want)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// paysTo reports whether t credits amount to account.
func paysTo(t *idlegrid.Transfer, account idlegrid.LedgerAccount, amount idlegrid.Micros) bool {
	for _, e := range t.Entries {
		if e.Account == account && e.Amount == amount {
			return true
		}
	}
	return false
}

// mustCommandFor returns the lease a node of the market was told to start
// for job, and that node.
func mustCommandFor(t *testing.T, m *testMarket, jobID string) (*idlegrid.Lease, context.Context) {
	t.Helper()
	for _, n := range []context.Context{m.node, m.rival} {
		cmds, err := m.srv.Commands(n, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			if c.Kind == idlegrid.CommandStart && c.Lease.JobID == jobID {
				return c.Lease, n
			}
		}
	}
	t.Fatalf("no node was told to start %s", jobID)
	return nil, nil
}

func TestServer_ForgedReceiptSlashesBond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, trustpolicy.Default())
		mustBond(t, m, 100)
		_, l := mustStart(t, m)
		m.advance(t, time.Minute)
		l = mustFindLease(t, m, l.ID)
		rs := chain(l, nodeKey(t, m.nodeID), nil, 30)
		rs[0].GPUSeconds = 50 // not what the node signed
		err := m.srv.ReceiveReceipts(m.node, l.ID, rs)
		if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Fatalf("ReceiveReceipts(tampered) = %v, want EINVALID", err)
		}
		ds, err := m.srv.ListDisputes(m.provider, idlegrid.DisputeFilter{})
		if err != nil {
			t.Fatal(err)
		} else if len(ds) != 1 || ds[0].Offence != "forged_receipt" || ds[0].State != idlegrid.DisputeUpheld {
			t.Fatalf("provider sees %+v, want one upheld forged_receipt", ds)
		}
		// 50 fixed + 25% of the bond + twice the harm of a 50 GPU-second claim.
		harm := idlegrid.CostOf(l.PriceMicrosPerGPUHour, 50)
		want := 50*idlegrid.MicrosPerUnit + 25*idlegrid.MicrosPerUnit + 2*harm
		want = min(want, 100*idlegrid.MicrosPerUnit)
		if ds[0].PenaltyMicros != want {
			t.Errorf("penalty = %s, want %s", ds[0].PenaltyMicros, want)
		}
		// Sending it again convicts nobody twice.
		_ = m.srv.ReceiveReceipts(m.node, l.ID, rs)
		if ds, _ := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{}); len(ds) != 1 {
			t.Errorf("%d disputes after a resend, want 1", len(ds))
		}
		if after, err := m.srv.ListDisputes(m.provider, idlegrid.DisputeFilter{Before: ds[0].ID}); err != nil || len(after) != 0 {
			t.Errorf("disputes after the only one = %+v (%v), want none", after, err)
		}
		_, err = m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{ProviderID: m.renterID, Before: ds[0].ID}) // not against that account
		wantCode(t, err, idlegrid.EINVALID)
		_, err = m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{Before: "dispute_missing"})
		wantCode(t, err, idlegrid.EINVALID)
		mustLedgerBalanced(t, m.store)
	})
}

func TestServer_DisputeByOperator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, trustpolicy.Default())
		mustBond(t, m, 100)
		providerID := callerID(m.provider)
		if _, err := m.srv.OpenDispute(m.provider, idlegrid.Dispute{Offence: "mismatched_result", ProviderID: providerID, Evidence: "x"}); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Errorf("a provider opens a dispute: %v, want EFORBIDDEN", err)
		}
		if _, err := m.srv.OpenDispute(m.renter, idlegrid.Dispute{Offence: "mismatched_result", ProviderID: providerID, Evidence: "x"}); !isInvalidOn(err, "dispute.lease_id") {
			t.Errorf("a renter's complaint of no lease: %v, want EINVALID naming dispute.lease_id", err)
		}
		if _, err := m.srv.OpenDispute(m.admin, idlegrid.Dispute{Offence: "rudeness", ProviderID: providerID, Evidence: "x"}); !isInvalidOn(err, "dispute.offence") ||
			!strings.Contains(err.Error(), "forged_receipt, fake_hardware, mismatched_result or broken_notice") {
			t.Errorf("unknown offence: %v, want EINVALID naming dispute.offence and listing the offences", err)
		}
		d, err := m.srv.OpenDispute(m.admin, idlegrid.Dispute{Offence: "mismatched_result", ProviderID: providerID,
			RenterID: m.renterID, HarmMicros: 5 * idlegrid.MicrosPerUnit, Evidence: "the renter's re-run differs"})
		if err != nil {
			t.Fatal(err)
		} else if d.State != idlegrid.DisputeOpen || d.PenaltyMicros != 0 {
			t.Fatalf("opened %+v, want open with no penalty yet", d)
		}
		if _, err := m.srv.ReleaseBond(m.provider, idlegrid.MicrosPerUnit, "r"); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			t.Errorf("release with a dispute open: %v, want ECONFLICT", err)
		}
		if _, err := m.srv.ResolveDispute(m.provider, d.ID, idlegrid.DisputeDismissed, "not me"); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Errorf("provider resolves its own dispute: %v, want EFORBIDDEN", err)
		}
		up, err := m.srv.ResolveDispute(m.admin, d.ID, idlegrid.DisputeUpheld, "two independent re-runs agree with each other")
		if err != nil {
			t.Fatal(err)
		}
		// 20 fixed + 10% of 100 + twice the 5 of harm.
		if want := 40 * idlegrid.MicrosPerUnit; up.State != idlegrid.DisputeUpheld || up.PenaltyMicros != want || up.PenaltyTo != "renter" {
			t.Errorf("upheld %+v, want a penalty of %s to the renter", up, want)
		}
		if got := mustAccountBalance(t, m, m.renterID).Available; got != 140*idlegrid.MicrosPerUnit {
			t.Errorf("renter available = %s, want 100 + 40", got)
		}
		if _, err := m.srv.FindDispute(m.renter, d.ID); err != nil {
			t.Errorf("the harmed renter cannot see its dispute: %v", err)
		}
		if _, err := m.srv.ReleaseBond(m.provider, idlegrid.MicrosPerUnit, "r2"); err != nil {
			t.Errorf("release once resolved: %v", err)
		}
		// The month's statements show it: taken from the provider's bond,
		// paid to the renter.
		month := time.Now().UTC().Format("2006-01")
		for who, ctx := range map[string]context.Context{"provider": m.provider, "renter": m.renter} {
			st, err := m.srv.Statement(ctx, "", month)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Penalties) != 1 || st.Penalties[0].DisputeID != d.ID || st.Penalties[0].PenaltyMicros != 40*idlegrid.MicrosPerUnit ||
				st.Penalties[0].Offence != "mismatched_result" || st.Penalties[0].PenaltyTo != "renter" {
				t.Errorf("the %s's statement's penalties = %+v, want dispute %s's 40 to the renter", who, st.Penalties, d.ID)
			}
		}
		if st, err := m.srv.Statement(m.provider, "", time.Now().UTC().AddDate(0, -1, 0).Format("2006-01")); err != nil || len(st.Penalties) != 0 {
			t.Errorf("last month's statement's penalties = %+v (%v), want none", st.Penalties, err)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// TestServer_DisputeParties: an operator's dispute names a provider, and
// its node, lease and harmed renter must be that provider's and that
// renter's, or a penalty could go to an account that was never harmed.
// Every fault is named at once.
func TestServer_DisputeParties(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, trustpolicy.Default())
		providerID := callerID(m.provider)
		_, lease := mustStart(t, m)
		otherID, otherNode := mustProviderNode(t, m, "elsewhere")
		stranger, _, _, err := m.srv.CreateAccount(m.admin, "stranger", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		otherNodeID := idlegrid.CallerFromContext(otherNode).NodeID
		for _, tc := range []struct {
			name   string
			d      idlegrid.Dispute
			fields []string
		}{
			{"no provider", idlegrid.Dispute{}, []string{"dispute.provider_id"}},
			{"a renter as provider", idlegrid.Dispute{ProviderID: m.renterID}, []string{"dispute.provider_id"}},
			{"another provider's node", idlegrid.Dispute{ProviderID: providerID, NodeID: otherNodeID}, []string{"dispute.node_id"}},
			{"no such node", idlegrid.Dispute{ProviderID: providerID, NodeID: "node_nope"}, []string{"dispute.node_id"}},
			{"no such lease", idlegrid.Dispute{ProviderID: otherID, LeaseID: "lease_nope"}, []string{"dispute.lease_id"}},
			{"another provider's lease", idlegrid.Dispute{ProviderID: otherID, LeaseID: lease.ID}, []string{"dispute.lease_id"}},
			{"another renter than the lease's", idlegrid.Dispute{ProviderID: lease.ProviderID, LeaseID: lease.ID, RenterID: stranger.ID}, []string{"dispute.renter_id"}},
			{"a provider as renter", idlegrid.Dispute{ProviderID: providerID, RenterID: otherID}, []string{"dispute.renter_id"}},
			{"every fault", idlegrid.Dispute{ProviderID: providerID, NodeID: otherNodeID, LeaseID: "lease_nope", RenterID: providerID},
				[]string{"dispute.node_id", "dispute.lease_id", "dispute.renter_id"}},
		} {
			tc.d.Offence, tc.d.Evidence = "mismatched_result", "x"
			_, err := m.srv.OpenDispute(m.admin, tc.d)
			var e *idlegrid.Error
			if !errors.As(err, &e) || e.Code != idlegrid.EINVALID {
				t.Errorf("%s: %v, want EINVALID", tc.name, err)
				continue
			}
			var got []string
			for _, p := range e.All() {
				got = append(got, p.Field)
			}
			if !slices.Equal(got, tc.fields) {
				t.Errorf("%s: fields %v (%v), want %v", tc.name, got, err, tc.fields)
			}
		}
		if ds, _ := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{}); len(ds) != 0 {
			t.Errorf("%d disputes opened, want none", len(ds))
		}
		if _, err := m.srv.OpenDispute(m.admin, idlegrid.Dispute{Offence: "mismatched_result", ProviderID: providerID,
			NodeID: lease.NodeID, LeaseID: lease.ID, RenterID: lease.RenterID, Evidence: "x"}); err != nil {
			t.Errorf("a dispute naming the provider's node, lease and renter: %v", err)
		}
		// A lease named without its renter: the lease's renter is the
		// harmed one, who sees the dispute and is paid its penalty.
		d, err := m.srv.OpenDispute(m.admin, idlegrid.Dispute{Offence: "broken_notice", ProviderID: providerID, LeaseID: lease.ID, Evidence: "x"})
		if err != nil {
			t.Fatal(err)
		} else if d.RenterID != lease.RenterID {
			t.Errorf("a dispute naming lease %s only: renter %q, want the lease's, %s", lease.ID, d.RenterID, lease.RenterID)
		}
		if _, err := m.srv.FindDispute(m.renter, d.ID); err != nil {
			t.Errorf("the lease's renter cannot see the dispute: %v", err)
		}
	})
}

// TestServer_PreemptedWithoutNoticeBreaksIt: a node that reports a bronze
// lease preempted when the server gave it no notice broke the notice its
// tier guarantees, whatever it calls the stop.
func TestServer_PreemptedWithoutNoticeBreaksIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, l, node := mustRunningBronze(t, 10*time.Minute)
		if err := m.srv.ReportLease(node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeasePreempted, Message: "the owner reclaimed it"}); err != nil {
			t.Fatal(err)
		}
		if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseFailed || got.Fault != idlegrid.FaultProvider {
			t.Errorf("the lease: %s (fault %q), want failed by the provider", got.State, got.Fault)
		}
		ds, err := m.srv.ListDisputes(m.renter, idlegrid.DisputeFilter{})
		if err != nil || len(ds) != 1 || ds[0].Offence != "broken_notice" || ds[0].State != idlegrid.DisputeUpheld {
			t.Errorf("disputes = %+v (%v), want one broken_notice upheld", ds, err)
		}
	})
}

// releasing is a store that releases the provider's bond right after the
// first time a penalty reads it, as a provider's release racing a
// conviction would.
type releasing struct {
	idlegrid.Store
	provider string
	done     bool
}

func (r *releasing) Balance(ctx context.Context, accountID string) (*idlegrid.Balance, error) {
	b, err := r.Store.Balance(ctx, accountID)
	if err != nil || accountID != r.provider || r.done || b.Bond == 0 {
		return b, err
	}
	r.done = true
	t, err := ledger.ReleaseBond(accountID, b.Bond-1, "raced", time.Now()) // 1 micro left
	if err != nil {
		return nil, err
	}
	if _, err := r.Store.PostTransfer(ctx, t); err != nil {
		return nil, err
	}
	return b, nil
}

// A bond released while a conviction priced its penalty does not take the
// conviction with it: the penalty is priced again on what is left.
func TestServer_ConvictionOutlivesARelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &releasing{}
		m := mustMarketOn(t, trustpolicy.Default(), func(s idlegrid.Store) idlegrid.Store { r.Store = s; return r })
		mustBond(t, m, 100)
		r.provider = callerID(m.provider)
		spec := testSpec()
		spec.Tier = idlegrid.TierBronze
		l, node := mustRunningFor(t, m, spec, 30*time.Minute)
		if err := m.srv.ReportLease(node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "owner wanted the GPU"}); err != nil {
			t.Fatal(err)
		}
		if !r.done {
			t.Fatal("the penalty never read the bond")
		}
		wantConviction(t, m, "broken_notice", l.NodeID)
		if b := mustAccountBalance(t, m, r.provider); b.Bond != 0 {
			t.Errorf("bond = %s after the release and the penalty, want the micro left taken", b.Bond)
		}
	})
}

// An operator's charge on a lease does not keep the market's proof of the
// same offence from its penalty: an open one is upheld with the proof, and
// after a dismissed one the proof is a conviction of its own.
func TestServer_ConvictionOverOperatorsDispute(t *testing.T) {
	for _, dismissed := range []bool{false, true} {
		t.Run(map[bool]string{false: "open", true: "dismissed"}[dismissed], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, l, node := mustRunningBronze(t, 10*time.Minute)
				d, err := m.srv.OpenDispute(m.admin, idlegrid.Dispute{Offence: "broken_notice", ProviderID: l.ProviderID,
					LeaseID: l.ID, Evidence: "the renter says the node vanished"})
				if err != nil {
					t.Fatal(err)
				}
				if dismissed {
					if _, err := m.srv.ResolveDispute(m.admin, d.ID, idlegrid.DisputeDismissed, "no proof yet"); err != nil {
						t.Fatal(err)
					}
				}
				if err := m.srv.ReportLease(node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeasePreempted, Message: "the owner reclaimed it"}); err != nil {
					t.Fatal(err)
				}
				ds, err := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{States: []idlegrid.DisputeState{idlegrid.DisputeUpheld}})
				if err != nil || len(ds) != 1 || ds[0].PenaltyMicros <= 0 || ds[0].Offence != "broken_notice" {
					t.Fatalf("upheld disputes = %+v (%v), want one broken_notice with its penalty", ds, err)
				}
				if got := ds[0].ID == d.ID; got == dismissed {
					t.Errorf("upheld dispute %s, the operator's %s: want the operator's upheld only when it was open", ds[0].ID, d.ID)
				}
				if ds[0].HarmMicros <= 0 {
					t.Errorf("upheld dispute's harm %s, want the harm the market measured, which priced its penalty", ds[0].HarmMicros)
				}
				if b := mustAccountBalance(t, m, l.ProviderID); b.Bond >= 100*idlegrid.MicrosPerUnit {
					t.Errorf("bond = %s, want less than the 100 posted", b.Bond)
				}
				mustLedgerBalanced(t, m.store)
			})
		})
	}
}

// TestServer_listsOfAnotherProvider: a provider that names another
// provider in a listing's filter is told it is not found, rather than
// given its own list as if it were the other's.
func TestServer_listsOfAnotherProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		other, _ := mustProviderNode(t, m, "elsewhere")
		own := callerID(m.provider)
		for name, list := range map[string]func(providerID string) error{
			"payouts": func(p string) error {
				_, err := m.srv.ListPayouts(m.provider, idlegrid.PayoutFilter{ProviderID: p})
				return err
			},
			"disputes": func(p string) error {
				_, err := m.srv.ListDisputes(m.provider, idlegrid.DisputeFilter{ProviderID: p})
				return err
			},
			"verifications": func(p string) error {
				_, err := m.srv.ListVerifications(m.provider, idlegrid.VerificationFilter{ProviderID: p})
				return err
			},
		} {
			if err := list(other); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
				t.Errorf("%s of another provider: %v, want not found", name, err)
			}
			if err := list(own); err != nil {
				t.Errorf("%s of its own, named: %v", name, err)
			}
			if err := list(""); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, err := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{ProviderID: other}); err != nil {
			t.Errorf("an admin's disputes of a provider: %v", err)
		}
	})
}
