package ledger_test

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

var at = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

const unit = idlegrid.MicrosPerUnit

var (
	available = idlegrid.RenterAvailable("renter_1")
	held      = idlegrid.RenterHeld("renter_1")
	earned    = idlegrid.ProviderPending("prov_1")
)

// newLease returns a lease of gpus GPUs for limitSeconds at price, with
// the hold HoldFor gives.
func newLease(price idlegrid.Micros, gpus int, limitSeconds int64) *idlegrid.Lease {
	l := &idlegrid.Lease{
		ID:                    "lease_1",
		JobID:                 "job_1",
		RenterID:              "renter_1",
		NodeID:                "node_1",
		ProviderID:            "prov_1",
		Tier:                  idlegrid.TierSilver,
		PriceMicrosPerGPUHour: price,
		LimitSeconds:          limitSeconds,
		HoldMicros:            ledger.HoldFor(price, gpus, limitSeconds),
	}
	for i := range gpus {
		l.GPUUUIDs = append(l.GPUUUIDs, "gpu-"+string(rune('a'+i%26)))
	}
	return l
}

func mustValid(tb testing.TB, t *idlegrid.Transfer) {
	tb.Helper()
	if err := t.Validate(); err != nil {
		tb.Fatalf("transfer %+v: %v", t, err)
	}
}

func TestRules_Validate(t *testing.T) {
	for _, bps := range []int64{0, 1, 1000, 10000} {
		if err := (ledger.Rules{FeeBasisPoints: bps}).Validate(); err != nil {
			t.Errorf("%d: %v", bps, err)
		}
	}
	for _, bps := range []int64{-1, 10001, 1 << 40} {
		err := ledger.Rules{FeeBasisPoints: bps}.Validate()
		var e *idlegrid.Error
		if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !asError(err, &e) || e.Field != "ledger.fee_basis_points" {
			t.Errorf("%d: got %v, want EINVALID on ledger.fee_basis_points", bps, err)
		}
	}
}

func asError(err error, e **idlegrid.Error) bool { return errors.As(err, e) }

func TestRules_Fee(t *testing.T) {
	tests := []struct {
		bps    int64
		charge idlegrid.Micros
		want   idlegrid.Micros
	}{
		{1000, 2 * unit, 200000},
		{0, 2 * unit, 0},
		{10000, 2 * unit, 2 * unit},
		{333, 277, 9},       // 92.241 rounds down
		{1, 9999, 0},        // under a micro goes to the provider
		{1, 10000, 1},       // exactly one micro
		{-5, unit, 0},       // clamped
		{20000, unit, unit}, // clamped
		{9999, idlegrid.Micros(1<<62 + 12345), idlegrid.Micros(mulDiv(1<<62+12345, 9999, 10000))},
	}
	for _, tt := range tests {
		if got := (ledger.Rules{FeeBasisPoints: tt.bps}).Fee(tt.charge); got != tt.want {
			t.Errorf("Fee(%d bps, %d) = %d, want %d", tt.bps, tt.charge, got, tt.want)
		}
	}
}

// mulDiv is a*b/c rounded down, computed without overflow.
func mulDiv(a, b, c int64) int64 {
	x := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	return x.Quo(x, big.NewInt(c)).Int64()
}

func TestTopUp(t *testing.T) {
	tr, err := ledger.TopUp("renter_1", 25*unit, "pay_123", at)
	if err != nil {
		t.Fatal(err)
	}
	mustValid(t, tr)
	want := []idlegrid.Entry{
		{Account: idlegrid.WorldAccount, Amount: -25 * unit},
		{Account: available, Amount: 25 * unit},
	}
	if !slices.Equal(tr.Entries, want) {
		t.Errorf("entries = %v, want %v", tr.Entries, want)
	}
	if got, want := tr.IdempotencyKey, "topup:renter_1:pay_123"; got != want {
		t.Errorf("key = %q, want %q", got, want)
	}
	if tr.Kind != idlegrid.TransferTopUp || !tr.CreatedAt.Equal(at) || tr.ID == "" || tr.LeaseID != "" {
		t.Errorf("transfer = %+v", tr)
	}
	other, _ := ledger.TopUp("renter_2", 25*unit, "pay_123", at)
	if other.IdempotencyKey == tr.IdempotencyKey {
		t.Errorf("two renters' top-ups share key %q", tr.IdempotencyKey)
	}
	if most, _ := ledger.TopUp("renter_1", ledger.MaxTopUpMicros, "k", at); most == nil {
		t.Errorf("the maximum top-up was refused")
	}

	bad := []struct {
		name, renter, key string
		amount            idlegrid.Micros
		field             string
	}{
		{"zero", "renter_1", "k", 0, "topup.amount_micros"},
		{"negative", "renter_1", "k", -1, "topup.amount_micros"},
		{"over the max", "renter_1", "k", ledger.MaxTopUpMicros + 1, "topup.amount_micros"},
		{"no renter", "", "k", unit, "topup.renter_id"},
		{"no key", "renter_1", "", unit, "topup.idempotency_key"},
		{"long key", "renter_1", strings.Repeat("k", 201), unit, "topup.idempotency_key"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := ledger.TopUp(tt.renter, tt.amount, tt.key, at)
			var e *idlegrid.Error
			if tr != nil || !asError(err, &e) || e.Code != idlegrid.EINVALID || e.Field != tt.field {
				t.Errorf("got %v, %v; want EINVALID on %s", tr, err, tt.field)
			}
		})
	}
}

func TestHoldFor(t *testing.T) {
	tests := []struct {
		price idlegrid.Micros
		gpus  int
		limit int64
		want  idlegrid.Micros
	}{
		{2 * unit, 2, 3600, 4 * unit},
		{2 * unit, 1, 1800, unit},
		{1000001, 1, 1, 277}, // 277.78 rounds down
		{1, 1, 1, 0},
		{1000 * unit, idlegrid.MaxGPUsPerNode, idlegrid.MaxJobSeconds, 1000 * unit * 16 * 720},
	}
	for _, tt := range tests {
		if got := ledger.HoldFor(tt.price, tt.gpus, tt.limit); got != tt.want {
			t.Errorf("HoldFor(%s, %d, %d) = %d, want %d", tt.price, tt.gpus, tt.limit, got, tt.want)
		}
	}
}

func TestHold(t *testing.T) {
	l := newLease(2*unit, 2, 3600)
	tr := ledger.Hold(l, at)
	mustValid(t, tr)
	want := []idlegrid.Entry{{Account: available, Amount: -4 * unit}, {Account: held, Amount: 4 * unit}}
	if !slices.Equal(tr.Entries, want) {
		t.Errorf("entries = %v, want %v", tr.Entries, want)
	}
	if tr.IdempotencyKey != "hold:lease_1" || tr.Kind != idlegrid.TransferHold || tr.LeaseID != "lease_1" || !tr.CreatedAt.Equal(at) {
		t.Errorf("transfer = %+v", tr)
	}
	if got, want := tr.Memo, "hold for lease lease_1: 2 GPU x 3600 s at $2.000000/GPU-h"; got != want {
		t.Errorf("memo = %q, want %q", got, want)
	}
	l.HoldMicros = 0
	if tr := ledger.Hold(l, at); tr != nil {
		t.Errorf("zero hold: got %+v, want nil", tr)
	}
}

func TestRules_Settle(t *testing.T) {
	tenPct := ledger.Rules{FeeBasisPoints: 1000}
	tests := []struct {
		name       string
		rules      ledger.Rules
		lease      *idlegrid.Lease
		gpuSeconds int64
		fault      idlegrid.Fault
		charge     idlegrid.Micros
		entries    []idlegrid.Entry
	}{
		{
			name: "half the limit", rules: tenPct, lease: newLease(2*unit, 2, 3600),
			gpuSeconds: 3600, charge: 2 * unit,
			entries: []idlegrid.Entry{
				{Account: held, Amount: -4 * unit},
				{Account: earned, Amount: 1800000},
				{Account: idlegrid.PlatformFees, Amount: 200000},
				{Account: available, Amount: 2 * unit},
			},
		},
		{
			name: "ran to the limit: nothing back", rules: tenPct, lease: newLease(2*unit, 2, 3600),
			gpuSeconds: 7200, charge: 4 * unit,
			entries: []idlegrid.Entry{
				{Account: held, Amount: -4 * unit},
				{Account: earned, Amount: 3600000},
				{Account: idlegrid.PlatformFees, Amount: 400000},
			},
		},
		{
			name: "past the limit: charge capped at the hold", rules: tenPct, lease: newLease(2*unit, 2, 3600),
			gpuSeconds: 1 << 40, charge: 4 * unit,
			entries: []idlegrid.Entry{
				{Account: held, Amount: -4 * unit},
				{Account: earned, Amount: 3600000},
				{Account: idlegrid.PlatformFees, Amount: 400000},
			},
		},
		{
			name: "workload at fault pays for what ran", rules: tenPct, lease: newLease(2*unit, 2, 3600),
			gpuSeconds: 360, fault: idlegrid.FaultWorkload, charge: 200000,
			entries: []idlegrid.Entry{
				{Account: held, Amount: -4 * unit},
				{Account: earned, Amount: 180000},
				{Account: idlegrid.PlatformFees, Amount: 20000},
				{Account: available, Amount: 3800000},
			},
		},
		{
			name: "provider at fault: full refund", rules: tenPct, lease: newLease(2*unit, 2, 3600),
			gpuSeconds: 3600, fault: idlegrid.FaultProvider, charge: 0,
			entries: []idlegrid.Entry{
				{Account: held, Amount: -4 * unit},
				{Account: available, Amount: 4 * unit},
			},
		},
		{
			name: "never started", rules: tenPct, lease: newLease(2*unit, 2, 3600),
			gpuSeconds: 0, charge: 0,
			entries: []idlegrid.Entry{
				{Account: held, Amount: -4 * unit},
				{Account: available, Amount: 4 * unit},
			},
		},
		{
			name: "no fee", rules: ledger.Rules{}, lease: newLease(2*unit, 1, 3600),
			gpuSeconds: 900, charge: 500000,
			entries: []idlegrid.Entry{
				{Account: held, Amount: -2 * unit},
				{Account: earned, Amount: 500000},
				{Account: available, Amount: 1500000},
			},
		},
		{
			name: "all fee", rules: ledger.Rules{FeeBasisPoints: 10000}, lease: newLease(2*unit, 1, 3600),
			gpuSeconds: 900, charge: 500000,
			entries: []idlegrid.Entry{
				{Account: held, Amount: -2 * unit},
				{Account: idlegrid.PlatformFees, Amount: 500000},
				{Account: available, Amount: 1500000},
			},
		},
		{
			name: "fractions round down", rules: ledger.Rules{FeeBasisPoints: 333}, lease: newLease(1000001, 1, 3600),
			gpuSeconds: 1, charge: 277, // 1,000,001/3600 = 277.78; fee 277*0.0333 = 9.22
			entries: []idlegrid.Entry{
				{Account: held, Amount: -1000001},
				{Account: earned, Amount: 268},
				{Account: idlegrid.PlatformFees, Amount: 9},
				{Account: available, Amount: 999724},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			charge, tr := tt.rules.Settle(tt.lease, tt.gpuSeconds, tt.fault, at)
			if charge != tt.charge {
				t.Errorf("charge = %d, want %d", charge, tt.charge)
			}
			mustValid(t, tr)
			if !slices.Equal(tr.Entries, tt.entries) {
				t.Errorf("entries = %v\nwant      %v", tr.Entries, tt.entries)
			}
			if tr.IdempotencyKey != "settle:lease_1" || tr.Kind != idlegrid.TransferSettle ||
				tr.LeaseID != "lease_1" || !tr.CreatedAt.Equal(at) || tr.ID == "" {
				t.Errorf("transfer = %+v", tr)
			}
		})
	}

	t.Run("memo", func(t *testing.T) {
		_, tr := tenPct.Settle(newLease(2*unit, 2, 3600), 3600, idlegrid.FaultNone, at)
		want := "settle lease lease_1: 3600 GPU-s at $2.000000/GPU-h, $2.000000 charged (fee $0.200000), $2.000000 released"
		if tr.Memo != want {
			t.Errorf("memo = %q\nwant   %q", tr.Memo, want)
		}
		_, tr = tenPct.Settle(newLease(2*unit, 2, 3600), 3600, idlegrid.FaultProvider, at)
		want = "settle lease lease_1: provider at fault, nothing charged, $4.000000 released"
		if tr.Memo != want {
			t.Errorf("memo = %q\nwant   %q", tr.Memo, want)
		}
	})

	t.Run("zero hold", func(t *testing.T) {
		l := newLease(1, 1, 1)
		if l.HoldMicros != 0 {
			t.Fatalf("hold = %d, want 0", l.HoldMicros)
		}
		charge, tr := tenPct.Settle(l, 1, idlegrid.FaultNone, at)
		if charge != 0 || tr != nil {
			t.Errorf("got %d, %+v; want 0, nil", charge, tr)
		}
	})
}

// TestRules_Settle_property checks the posting invariants on random leases.
func TestRules_Settle_property(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	faults := []idlegrid.Fault{idlegrid.FaultNone, idlegrid.FaultWorkload, idlegrid.FaultProvider}
	for i := range 20000 {
		price := idlegrid.Micros(1 + r.Int64N(int64(1000*unit)))
		if r.IntN(3) == 0 {
			price = idlegrid.Micros(1 + r.Int64N(10000)) // tiny prices round hard
		}
		gpus := 1 + r.IntN(idlegrid.MaxGPUsPerNode)
		limit := 1 + r.Int64N(idlegrid.MaxJobSeconds)
		l := newLease(price, gpus, limit)
		if r.IntN(10) == 0 {
			l.HoldMicros = idlegrid.Micros(r.Int64N(int64(l.HoldMicros) + 1)) // a short hold caps the charge
		}
		gpuSeconds := r.Int64N(2*int64(gpus)*limit+2) - 1
		rules := ledger.Rules{FeeBasisPoints: r.Int64N(10001)}
		fault := faults[r.IntN(len(faults))]

		charge, tr := rules.Settle(l, gpuSeconds, fault, at)
		if l.HoldMicros == 0 {
			if charge != 0 || tr != nil {
				t.Fatalf("case %d: zero hold gave %d, %+v", i, charge, tr)
			}
			continue
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if charge < 0 || charge > l.HoldMicros {
			t.Fatalf("case %d: charge %d outside 0..hold %d", i, charge, l.HoldMicros)
		}
		if fault == idlegrid.FaultProvider && charge != 0 {
			t.Fatalf("case %d: provider at fault but charged %d", i, charge)
		}
		want := idlegrid.Micros(mulDiv(int64(price), max(gpuSeconds, 0), 3600))
		if fault != idlegrid.FaultProvider && charge != min(want, l.HoldMicros) {
			t.Fatalf("case %d: charge %d, want min(%d, hold %d)", i, charge, want, l.HoldMicros)
		}
		got := map[idlegrid.LedgerAccount]idlegrid.Micros{}
		for _, e := range tr.Entries {
			if e.Amount == 0 {
				t.Fatalf("case %d: zero entry on %s", i, e.Account)
			}
			if _, dup := got[e.Account]; dup {
				t.Fatalf("case %d: two entries on %s", i, e.Account)
			}
			got[e.Account] = e.Amount
		}
		fee := idlegrid.Micros(mulDiv(int64(charge), rules.FeeBasisPoints, 10000))
		switch {
		case got[held] != -l.HoldMicros:
			t.Fatalf("case %d: held %d, want %d", i, got[held], -l.HoldMicros)
		case got[earned] < 0 || got[idlegrid.PlatformFees] < 0 || got[available] < 0:
			t.Fatalf("case %d: negative credit in %v", i, tr.Entries)
		case got[earned]+got[idlegrid.PlatformFees] != charge:
			t.Fatalf("case %d: provider %d + fees %d != charge %d", i, got[earned], got[idlegrid.PlatformFees], charge)
		case got[idlegrid.PlatformFees] != fee:
			t.Fatalf("case %d: fee %d, want %d", i, got[idlegrid.PlatformFees], fee)
		case charge+got[available] != l.HoldMicros:
			t.Fatalf("case %d: charge %d + release %d != hold %d", i, charge, got[available], l.HoldMicros)
		}
	}
}
