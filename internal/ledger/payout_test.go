package ledger_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

var (
	payable = idlegrid.ProviderPayable("prov_1")
	payout  = idlegrid.ProviderPayout("prov_1")
	bond    = idlegrid.ProviderBond("prov_1")
)

func TestRules_Settle_creditsPending(t *testing.T) {
	_, tr := ledger.Rules{FeeBasisPoints: 1000}.Settle(newLease(2*unit, 2, 3600), 1800, idlegrid.FaultNone, at)
	if tr.GPUSeconds != 1800 {
		t.Errorf("billed %d GPU-s, want 1800", tr.GPUSeconds)
	}
	if tr.Entries[1].Account != idlegrid.ProviderPending("prov_1") {
		t.Errorf("provider's share goes to %s, want its pending account", tr.Entries[1].Account)
	}
	for _, tt := range []struct {
		secs  int64
		fault idlegrid.Fault
		want  int64
	}{{-5, "", 0}, {1 << 40, "", 7200}, {3600, idlegrid.FaultProvider, 0}} {
		_, tr := ledger.Rules{}.Settle(newLease(2*unit, 2, 3600), tt.secs, tt.fault, at)
		if tr.GPUSeconds != tt.want {
			t.Errorf("Settle(%d s, fault %q) billed %d GPU-s, want %d", tt.secs, tt.fault, tr.GPUSeconds, tt.want)
		}
	}
}

func TestMature(t *testing.T) {
	_, s := ledger.Rules{FeeBasisPoints: 1000}.Settle(newLease(2*unit, 2, 3600), 3600, idlegrid.FaultNone, at)
	m := ledger.Mature(s, 0, at)
	mustValid(t, m)
	want := []idlegrid.Entry{{Account: earned, Amount: -1800000}, {Account: payable, Amount: 1800000}}
	if !slices.Equal(m.Entries, want) {
		t.Errorf("entries = %v, want %v", m.Entries, want)
	}
	if m.IdempotencyKey != "mature:settle:lease_1" || m.Kind != idlegrid.TransferMature || m.LeaseID != "lease_1" {
		t.Errorf("transfer = %+v", m)
	}
	if again := ledger.Mature(s, 0, at); again.IdempotencyKey != m.IdempotencyKey {
		t.Errorf("maturing twice gives keys %q and %q; want one", m.IdempotencyKey, again.IdempotencyKey)
	}
	_, refund := ledger.Rules{}.Settle(newLease(2*unit, 2, 3600), 3600, idlegrid.FaultProvider, at)
	if m := ledger.Mature(refund, 0, at); m != nil {
		t.Errorf("a settlement that credits no provider matures into %+v, want nil", m)
	}
}

// TestMature_refunded: what disputes refunded of a settlement's earnings
// does not mature; a settlement refunded in full matures into nothing.
func TestMature_refunded(t *testing.T) {
	_, s := ledger.Rules{FeeBasisPoints: 1000}.Settle(newLease(2*unit, 2, 3600), 3600, idlegrid.FaultNone, at)
	if got := ledger.Earned(s); got != 1800000 {
		t.Fatalf("Earned = %s, want 1.8", got)
	}
	m := ledger.Mature(s, 500000, at)
	want := []idlegrid.Entry{{Account: earned, Amount: -1300000}, {Account: payable, Amount: 1300000}}
	if !slices.Equal(m.Entries, want) {
		t.Errorf("entries after a refund of 0.5 = %v, want %v", m.Entries, want)
	}
	for _, all := range []idlegrid.Micros{1800000, 2000000} {
		if m := ledger.Mature(s, all, at); m != nil {
			t.Errorf("a settlement refunded %s of 1.8 matures into %+v, want nil", all, m)
		}
	}
}

// TestRefund: a renter's refund from a provider's pending earnings joins
// the dispute's penalty, or makes the dispute's transfer when the bond
// paid nothing; either sums to zero, under the dispute's key.
func TestRefund(t *testing.T) {
	refund := []idlegrid.Entry{{Account: idlegrid.ProviderPending("prov_1"), Amount: -5}, {Account: idlegrid.RenterAvailable("ren_1"), Amount: 5}}
	alone, err := ledger.Refund(nil, "prov_1", "ren_1", "lease_1", "dispute_1", "mismatched_result", 5, at)
	if err != nil || alone.IdempotencyKey != "slash:dispute_1" || alone.Kind != idlegrid.TransferPenalty || alone.LeaseID != "lease_1" ||
		!slices.Equal(alone.Entries, refund) || ledger.Refunded("prov_1", alone) != 5 {
		t.Errorf("a refund alone: %+v, %v", alone, err)
	}
	slash, err := ledger.Slash("prov_1", "ren_1", 7, "dispute_1", "mismatched_result", at)
	if err != nil {
		t.Fatal(err)
	}
	both, err := ledger.Refund(slash, "prov_1", "ren_1", "lease_1", "dispute_1", "mismatched_result", 5, at)
	var sum idlegrid.Micros
	for _, e := range both.Entries {
		sum += e.Amount
	}
	if err != nil || len(both.Entries) != 4 || sum != 0 || !slices.Equal(both.Entries[2:], refund) || !strings.Contains(both.Memo, "refunded to renter ren_1") {
		t.Errorf("a refund with a penalty: %+v (sum %s), %v", both, sum, err)
	}
	for _, bad := range []idlegrid.Micros{0, -1} {
		if _, err := ledger.Refund(nil, "prov_1", "ren_1", "lease_1", "dispute_1", "x", bad, at); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("a refund of %d: %v, want EINVALID", bad, err)
		}
	}
	if _, err := ledger.Refund(nil, "prov_1", "", "lease_1", "dispute_1", "x", 5, at); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("a refund to no renter: %v, want EINVALID", err)
	}
}

// TestRefundFee: what the provider's earnings did not pay comes back from
// the platform's fee, in the same transfer, which still sums to zero;
// FeeRefunded and Fee read it back.
func TestRefundFee(t *testing.T) {
	earnings, err := ledger.Refund(nil, "prov_1", "ren_1", "lease_1", "dispute_1", "mismatched_result", 9, at)
	if err != nil {
		t.Fatal(err)
	}
	both, err := ledger.RefundFee(earnings, "ren_1", "lease_1", "dispute_1", "mismatched_result", 1, at)
	var sum idlegrid.Micros
	for _, e := range both.Entries {
		sum += e.Amount
	}
	fee := []idlegrid.Entry{{Account: idlegrid.PlatformFees, Amount: -1}, {Account: idlegrid.RenterAvailable("ren_1"), Amount: 1}}
	if err != nil || sum != 0 || !slices.Equal(both.Entries[2:], fee) || ledger.FeeRefunded(both) != 1 || ledger.Refunded("prov_1", both) != 9 ||
		!strings.Contains(both.Memo, "of the platform's fee on lease lease_1 refunded to renter ren_1") {
		t.Errorf("a fee refund after the earnings': %+v (sum %s), %v", both, sum, err)
	}
	alone, err := ledger.RefundFee(nil, "ren_1", "lease_1", "dispute_2", "broken_notice", 3, at)
	if err != nil || alone.IdempotencyKey != "slash:dispute_2" || alone.LeaseID != "lease_1" || ledger.FeeRefunded(alone) != 3 {
		t.Errorf("a fee refund alone: %+v, %v", alone, err)
	}
	if _, err := ledger.RefundFee(nil, "", "lease_1", "dispute_2", "x", 3, at); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("a fee refund to no renter: %v, want EINVALID", err)
	}
	settle := &idlegrid.Transfer{Entries: []idlegrid.Entry{{Account: idlegrid.RenterHeld("ren_1"), Amount: -10},
		{Account: idlegrid.ProviderPending("prov_1"), Amount: 9}, {Account: idlegrid.PlatformFees, Amount: 1}}}
	if ledger.Fee(settle) != 1 || ledger.Earned(settle) != 9 {
		t.Errorf("a settlement's fee %s and earnings %s, want 1 and 9", ledger.Fee(settle), ledger.Earned(settle))
	}
}

func TestRequestPayout(t *testing.T) {
	p := &idlegrid.Payout{ID: "payout_1", ProviderID: "prov_1", AmountMicros: 5 * unit, IdempotencyKey: "k"}
	tr, err := ledger.RequestPayout(p, at)
	if err != nil {
		t.Fatal(err)
	}
	mustValid(t, tr)
	want := []idlegrid.Entry{{Account: payable, Amount: -5 * unit}, {Account: payout, Amount: 5 * unit}}
	if !slices.Equal(tr.Entries, want) || tr.IdempotencyKey != "payout:payout_1" || tr.Kind != idlegrid.TransferPayout {
		t.Errorf("transfer = %+v", tr)
	}
	for _, tt := range []struct {
		change func(p *idlegrid.Payout)
		field  string
	}{
		{func(p *idlegrid.Payout) { p.AmountMicros = 0 }, "payout.amount_micros"},
		{func(p *idlegrid.Payout) { p.AmountMicros = ledger.MaxPayoutMicros + 1 }, "payout.amount_micros"},
		{func(p *idlegrid.Payout) { p.IdempotencyKey = "" }, "payout.idempotency_key"},
		{func(p *idlegrid.Payout) { p.ProviderID = "" }, "payout.provider_id"},
		{func(p *idlegrid.Payout) { p.ID = "" }, "payout.id"},
	} {
		bad := *p
		tt.change(&bad)
		_, err := ledger.RequestPayout(&bad, at)
		var e *idlegrid.Error
		if !asError(err, &e) || e.Code != idlegrid.EINVALID || e.Field != tt.field {
			t.Errorf("got %v, want EINVALID on %s", err, tt.field)
		}
	}
}

func TestResolvePayout(t *testing.T) {
	p := &idlegrid.Payout{ID: "payout_1", ProviderID: "prov_1", AmountMicros: 5 * unit, State: idlegrid.PayoutRequested}
	settled, err := ledger.ResolvePayout(p, idlegrid.PayoutSettled, at)
	if err != nil {
		t.Fatal(err)
	}
	mustValid(t, settled)
	want := []idlegrid.Entry{{Account: payout, Amount: -5 * unit}, {Account: idlegrid.WorldAccount, Amount: 5 * unit}}
	if !slices.Equal(settled.Entries, want) || settled.IdempotencyKey != "payout-settle:payout_1" || settled.Kind != idlegrid.TransferPayoutSettle {
		t.Errorf("settled = %+v", settled)
	}
	rejected, err := ledger.ResolvePayout(p, idlegrid.PayoutRejected, at)
	if err != nil {
		t.Fatal(err)
	}
	want = []idlegrid.Entry{{Account: payout, Amount: -5 * unit}, {Account: payable, Amount: 5 * unit}}
	if !slices.Equal(rejected.Entries, want) || rejected.IdempotencyKey != "payout-reject:payout_1" || rejected.Kind != idlegrid.TransferPayoutReject {
		t.Errorf("rejected = %+v", rejected)
	}
	if _, err := ledger.ResolvePayout(p, idlegrid.PayoutRequested, at); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("resolving to requested: %v, want EINVALID", err)
	}
	done := *p
	done.State = idlegrid.PayoutSettled
	if _, err := ledger.ResolvePayout(&done, idlegrid.PayoutRejected, at); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
		t.Errorf("resolving a settled payout: %v, want ECONFLICT", err)
	}
}

func TestBondAndPenalty(t *testing.T) {
	deposit, err := ledger.Bond("prov_1", 3*unit, ledger.BondFromWorld, "wire-9", at)
	if err != nil {
		t.Fatal(err)
	}
	fromEarnings, _ := ledger.Bond("prov_1", unit, ledger.BondFromPayable, "k2", at)
	penalty, err := ledger.Penalty("prov_1", 2*unit, "broke a notice", "lease_9", at)
	if err != nil {
		t.Fatal(err)
	}
	release, _ := ledger.ReleaseBond("prov_1", unit, "k3", at)
	for _, tt := range []struct {
		tr      *idlegrid.Transfer
		key     string
		kind    idlegrid.TransferKind
		entries []idlegrid.Entry
	}{
		{deposit, "bond:prov_1:wire-9", idlegrid.TransferBond, []idlegrid.Entry{{Account: idlegrid.WorldAccount, Amount: -3 * unit}, {Account: bond, Amount: 3 * unit}}},
		{fromEarnings, "bond:prov_1:k2", idlegrid.TransferBond, []idlegrid.Entry{{Account: payable, Amount: -unit}, {Account: bond, Amount: unit}}},
		{penalty, "penalty:prov_1:lease_9", idlegrid.TransferPenalty, []idlegrid.Entry{{Account: bond, Amount: -2 * unit}, {Account: idlegrid.MarketPenalties, Amount: 2 * unit}}},
		{release, "release:prov_1:k3", idlegrid.TransferBond, []idlegrid.Entry{{Account: bond, Amount: -unit}, {Account: payable, Amount: unit}}},
	} {
		mustValid(t, tt.tr)
		if tt.tr.IdempotencyKey != tt.key || tt.tr.Kind != tt.kind || !slices.Equal(tt.tr.Entries, tt.entries) {
			t.Errorf("transfer = %+v\nwant key %s kind %s entries %v", tt.tr, tt.key, tt.kind, tt.entries)
		}
	}
	// A bond may be posted in parts, each within a payout's ceiling; a
	// penalty takes its share of the whole.
	big := 3 * ledger.MaxPayoutMicros
	if tr, err := ledger.Slash("prov_1", "", big, "dispute_1", "fake_hardware", at); err != nil || tr.Entries[0].Amount != -big {
		t.Errorf("a slash of %s: %+v, %v; want it whole", big, tr, err)
	}
	if tr, err := ledger.Penalty("prov_1", big, "broke a notice", "k", at); err != nil || tr.Entries[0].Amount != -big {
		t.Errorf("a penalty of %s: %+v, %v; want it whole", big, tr, err)
	}
	if _, err := ledger.Slash("prov_1", "", 0, "dispute_1", "fake_hardware", at); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("a slash of nothing: %v, want EINVALID", err)
	}
	if _, err := ledger.Penalty("prov_1", unit, "", "k", at); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("penalty without a reason: %v, want EINVALID", err)
	}
	if _, err := ledger.Bond("prov_1", 0, ledger.BondFromWorld, "k", at); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("bond of zero: %v, want EINVALID", err)
	}
	if _, err := ledger.ReleaseBond("prov_1", unit, "", at); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("release without a key: %v, want EINVALID", err)
	}
}
