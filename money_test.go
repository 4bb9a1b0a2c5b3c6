package idlegrid_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

func TestMicros_String(t *testing.T) {
	tests := []struct {
		m    idlegrid.Micros
		want string
	}{
		{0, "$0.000000"},
		{1, "$0.000001"},
		{1250000, "$1.250000"},
		{-1250000, "-$1.250000"},
		{-1, "-$0.000001"},
		{1000 * idlegrid.MicrosPerUnit, "$1000.000000"},
		{math.MaxInt64, "$9223372036854.775807"},
		{-math.MaxInt64, "-$9223372036854.775807"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("Micros(%d).String() = %q, want %q", int64(tt.m), got, tt.want)
		}
	}
}

func TestMicros_String_minInt64(t *testing.T) {
	if got, want := idlegrid.Micros(math.MinInt64).String(), "-$9223372036854.775808"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseMicros(t *testing.T) {
	tests := []struct {
		in   string
		want idlegrid.Micros
	}{
		{"2.50", 2500000},
		{"$2.5", 2500000},
		{" $ 2.5 ", 2500000},
		{"0.000001", 1},
		{".5", 500000},
		{"3.", 3000000},
		{"7", 7000000},
		{"007.100", 7100000},
		{"-1.25", -1250000},
		{"$-1.25", -1250000},
		{"0", 0},
		{"9223372036853.999999", 9223372036853999999},
	}
	for _, tt := range tests {
		got, err := idlegrid.ParseMicros(tt.in)
		if err != nil {
			t.Errorf("ParseMicros(%q): %v", tt.in, err)
		} else if got != tt.want {
			t.Errorf("ParseMicros(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestParseMicros_errors(t *testing.T) {
	tests := []struct {
		in, want string // want: a part of the error message
	}{
		{"", "empty"},
		{"$", "empty"},
		{".", "empty"},
		{"-", "empty"},
		{"1.0000001", "6 decimal places"},
		{"abc", "not a decimal amount"},
		{"1.2.3", "not a decimal amount"},
		{"1,5", "not a decimal amount"},
		{"1e6", "not a decimal amount"},
		{"--1", "not a decimal amount"},
		{"1.-5", "not a decimal amount"},
		{"0x10", "not a decimal amount"},
		{"9223372036854", "too large"},
		{"99999999999999999999", "not a decimal amount"},
	}
	for _, tt := range tests {
		got, err := idlegrid.ParseMicros(tt.in)
		if err == nil {
			t.Errorf("ParseMicros(%q) = %d, want an error", tt.in, got)
		} else if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseMicros(%q): %v, want %q in it", tt.in, err, tt.want)
		}
	}
}

func TestParseMicros_signInsideNumber(t *testing.T) {
	for _, in := range []string{"1.+5", "+1", "$+1.5", "1.+"} {
		if got, err := idlegrid.ParseMicros(in); err == nil {
			t.Errorf("ParseMicros(%q) = %d, want an error", in, got)
		}
	}
}

// FuzzParseMicros checks that whatever ParseMicros accepts, String writes
// back in a form that parses to the same amount.
func FuzzParseMicros(f *testing.F) {
	for _, s := range []string{"2.50", "$2.5", "0.000001", "-1.25", ".5", "3.", "9223372036853.999999", "", "1.2.3", "1.+5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := idlegrid.ParseMicros(s)
		if err != nil {
			return
		}
		if m < 0 {
			// String writes "-$1.000000", which ParseMicros refuses: see
			// TestParseMicros_negativeRoundTrip. Check the magnitude instead.
			m = -m
		}
		back, err := idlegrid.ParseMicros(m.String())
		if err != nil {
			t.Fatalf("ParseMicros(%q) = %d, but its String %q does not parse: %v", s, m, m.String(), err)
		}
		if back != m {
			t.Fatalf("ParseMicros(%q) = %d, String %q parses to %d", s, m, m.String(), back)
		}
	})
}

func TestMicros_roundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		m := idlegrid.Micros(r.Int64N(9223372036853999999))
		if r.IntN(3) == 0 {
			m %= 10_000_000
		}
		got, err := idlegrid.ParseMicros(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseMicros(%q) = %d, %v; want %d", m.String(), got, err, m)
		}
	}
}

func TestParseMicros_negativeRoundTrip(t *testing.T) {
	for _, m := range []idlegrid.Micros{-1, -1250000, -9223372036853999999} {
		if got, err := idlegrid.ParseMicros(m.String()); err != nil || got != m {
			t.Errorf("ParseMicros(%q) = %d, %v; want %d", m.String(), got, err, m)
		}
	}
	if got, err := idlegrid.ParseMicros("-$1"); err != nil || got != -idlegrid.MicrosPerUnit {
		t.Errorf(`ParseMicros("-$1") = %d, %v`, got, err)
	}
}

func TestCostOf(t *testing.T) {
	const unit = idlegrid.MicrosPerUnit
	tests := []struct {
		name       string
		price      idlegrid.Micros
		gpuSeconds int64
		want       idlegrid.Micros
	}{
		{"one GPU-hour", 2 * unit, 3600, 2 * unit},
		{"half an hour", 2 * unit, 1800, unit},
		{"one second", 3600, 1, 1},
		{"rounds down", 3599, 1, 0},
		{"rounds down past whole hours", 1000001, 3601, 1000001 + 277},
		{"nothing ran", 2 * unit, 0, 0},
		{"top price, longest lease, most GPUs", 1000 * unit, idlegrid.MaxGPUsPerNode * idlegrid.MaxJobSeconds, 1000 * unit * 16 * 720},
		{"largest that fits", 1000 * unit, 9223372036854 / 1000 * 3600, 1000 * unit * (9223372036854 / 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := idlegrid.CostOf(tt.price, tt.gpuSeconds); got != tt.want {
				t.Errorf("CostOf(%d, %d) = %d, want %d", tt.price, tt.gpuSeconds, got, tt.want)
			}
		})
	}
}

// TestCostOf_exact compares CostOf with price*seconds/3600 in big integers
// over the whole range of valid prices and durations.
func TestCostOf_exact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	maxGPUSeconds := int64(idlegrid.MaxGPUsPerNode) * idlegrid.MaxNodesPerJob * idlegrid.MaxJobSeconds
	for range 20000 {
		price := idlegrid.Micros(1 + r.Int64N(int64(1000*idlegrid.MicrosPerUnit)))
		secs := r.Int64N(maxGPUSeconds + 1)
		if r.IntN(2) == 0 {
			secs = r.Int64N(7200)
		}
		want := new(big.Int).Mul(big.NewInt(int64(price)), big.NewInt(secs))
		want.Quo(want, big.NewInt(3600))
		if got := idlegrid.CostOf(price, secs); !want.IsInt64() || int64(got) != want.Int64() {
			t.Fatalf("CostOf(%d, %d) = %d, want %s", price, secs, got, want)
		}
	}
}

func TestTransfer_Validate(t *testing.T) {
	a, b := idlegrid.RenterAvailable("r1"), idlegrid.RenterHeld("r1")
	valid := func() *idlegrid.Transfer {
		return &idlegrid.Transfer{
			IdempotencyKey: "hold:lease_1",
			Kind:           idlegrid.TransferHold,
			Entries:        []idlegrid.Entry{{Account: a, Amount: -5}, {Account: b, Amount: 5}},
		}
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid transfer: %v", err)
	}
	tests := []struct {
		name   string
		change func(tr *idlegrid.Transfer)
		field  string
	}{
		{"no key", func(tr *idlegrid.Transfer) { tr.IdempotencyKey = "" }, "transfer.idempotency_key"},
		{"no entries", func(tr *idlegrid.Transfer) { tr.Entries = nil }, "transfer.entries"},
		{"one entry", func(tr *idlegrid.Transfer) { tr.Entries = tr.Entries[:1] }, "transfer.entries"},
		{"unbalanced", func(tr *idlegrid.Transfer) { tr.Entries[1].Amount = 6 }, "transfer.entries"},
		{"no account", func(tr *idlegrid.Transfer) { tr.Entries[0].Account = "" }, "transfer.entries.account"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := valid()
			tt.change(tr)
			wantField(t, tr.Validate(), tt.field)
		})
	}
	t.Run("three way", func(t *testing.T) {
		tr := valid()
		tr.Entries = []idlegrid.Entry{{Account: b, Amount: -10}, {Account: idlegrid.ProviderPending("p"), Amount: 9}, {Account: idlegrid.PlatformFees, Amount: 1}}
		if err := tr.Validate(); err != nil {
			t.Error(err)
		}
	})
	t.Run("overflowing sum", func(t *testing.T) {
		tr := valid()
		tr.Entries = []idlegrid.Entry{{Account: a, Amount: math.MaxInt64}, {Account: b, Amount: math.MaxInt64}, {Account: idlegrid.WorldAccount, Amount: 2}}
		wantField(t, tr.Validate(), "transfer.entries")
	})
}

func TestLedgerAccount(t *testing.T) {
	tests := []struct {
		account  idlegrid.LedgerAccount
		name     string
		owner    string
		negative bool
	}{
		{idlegrid.RenterAvailable("r1"), "renter:r1:available", "r1", false},
		{idlegrid.RenterHeld("r1"), "renter:r1:held", "r1", false},
		{idlegrid.ProviderPending("p1"), "provider:p1:pending", "p1", false},
		{idlegrid.ProviderPayable("p1"), "provider:p1:payable", "p1", false},
		{idlegrid.ProviderPayout("p1"), "provider:p1:payout", "p1", false},
		{idlegrid.ProviderBond("p1"), "provider:p1:bond", "p1", false},
		{idlegrid.PlatformFees, "platform:fees", "", false},
		{idlegrid.MarketPenalties, "market:penalties", "", false},
		{idlegrid.WorldAccount, "world", "", true},
	}
	for _, tt := range tests {
		if string(tt.account) != tt.name || tt.account.Owner() != tt.owner || tt.account.MayGoNegative() != tt.negative {
			t.Errorf("%q: owner %q negative %v; want %q, %q, %v", tt.account, tt.account.Owner(), tt.account.MayGoNegative(), tt.name, tt.owner, tt.negative)
		}
	}
}
