package idlegrid

import (
	"math"
	"strings"
	"time"
)

// LedgerAccount names an account of the double-entry ledger. The balance of
// an account is the sum of its entries; every transfer sums to zero, so all
// accounts together always sum to zero.
type LedgerAccount string

// WorldAccount is where money enters and leaves the market (top-ups, payouts).
// It is the only account that goes negative.
const WorldAccount LedgerAccount = "world"

// PlatformFees collects the platform's share of every charge.
const PlatformFees LedgerAccount = "platform:fees"

// RenterAvailable is what a renter can spend.
func RenterAvailable(renterID string) LedgerAccount {
	return LedgerAccount("renter:" + renterID + ":available")
}

// RenterHeld is a renter's money in escrow for running leases.
func RenterHeld(renterID string) LedgerAccount { return LedgerAccount("renter:" + renterID + ":held") }

// ProviderEarned is what a provider has been credited.
func ProviderEarned(providerID string) LedgerAccount {
	return LedgerAccount("provider:" + providerID + ":earned")
}

// MayGoNegative reports whether the account may hold a negative balance.
func (a LedgerAccount) MayGoNegative() bool { return a == WorldAccount }

// Owner returns the account ID that owns a, or "" for market accounts.
func (a LedgerAccount) Owner() string {
	parts := strings.Split(string(a), ":")
	if len(parts) == 3 {
		return parts[1]
	}
	return ""
}

// TransferKind names why money moved.
type TransferKind string

const (
	TransferTopUp  TransferKind = "topup"  // world → renter available
	TransferHold   TransferKind = "hold"   // renter available → held, at placement
	TransferSettle TransferKind = "settle" // held → provider + fees, rest back to available
)

// Entry is one line of a transfer: a signed amount on one account.
type Entry struct {
	Account LedgerAccount `json:"account"`
	Amount  Micros        `json:"amount"`
}

// Transfer is one balanced movement of money.
type Transfer struct {
	ID string `json:"id"`
	// IdempotencyKey makes a retried transfer a no-op. It is unique.
	IdempotencyKey string       `json:"idempotency_key"`
	Kind           TransferKind `json:"kind"`
	LeaseID        string       `json:"lease_id,omitempty"`
	Memo           string       `json:"memo,omitempty"`
	Entries        []Entry      `json:"entries"`
	CreatedAt      time.Time    `json:"created_at"`
}

// Validate checks that t balances and names its accounts.
func (t *Transfer) Validate() error {
	if t.IdempotencyKey == "" {
		return Invalid("transfer.idempotency_key", "required")
	} else if len(t.Entries) < 2 {
		return Invalid("transfer.entries", "a transfer needs at least two entries")
	}
	var sum Micros
	for _, e := range t.Entries {
		if e.Account == "" {
			return Invalid("transfer.entries.account", "required")
		}
		if (e.Amount > 0 && sum > math.MaxInt64-e.Amount) || (e.Amount < 0 && sum < math.MinInt64-e.Amount) {
			return Invalid("transfer.entries", "amounts too large")
		}
		sum += e.Amount
	}
	if sum != 0 {
		return Invalid("transfer.entries", "entries sum to %d, not zero", sum)
	}
	return nil
}

// Balance is one account holder's money.
type Balance struct {
	AccountID string `json:"account_id"`
	Available Micros `json:"available_micros"`
	Held      Micros `json:"held_micros"`
	Earned    Micros `json:"earned_micros"`
	Spent     Micros `json:"spent_micros"` // charged to this renter so far
}

// TransferFilter selects transfers.
type TransferFilter struct {
	AccountID string // any entry on an account owned by this ID
	LeaseID   string
	Limit     int
}
