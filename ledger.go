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

// MarketPenalties collects what providers forfeit from their bonds when they
// break the market's rules; the market decides where it goes from there
// (compensation to renters, or the platform).
const MarketPenalties LedgerAccount = "market:penalties"

// RenterAvailable is what a renter can spend.
func RenterAvailable(renterID string) LedgerAccount {
	return LedgerAccount("renter:" + renterID + ":available")
}

// RenterHeld is a renter's money in escrow for running leases.
func RenterHeld(renterID string) LedgerAccount { return LedgerAccount("renter:" + renterID + ":held") }

// ProviderPending is what a provider has earned but may not withdraw yet:
// earnings stay pending for the market's payout hold after the settlement
// that credited them, so that a dispute can still reach them.
func ProviderPending(providerID string) LedgerAccount {
	return LedgerAccount("provider:" + providerID + ":pending")
}

// ProviderPayable is what a provider may ask to be paid out.
func ProviderPayable(providerID string) LedgerAccount {
	return LedgerAccount("provider:" + providerID + ":payable")
}

// ProviderPayout is a provider's money on its way out of the market: a
// requested payout that an operator has not settled or rejected yet.
func ProviderPayout(providerID string) LedgerAccount {
	return LedgerAccount("provider:" + providerID + ":payout")
}

// ProviderBond is what a provider has staked as a guarantee of good
// conduct; penalties are taken from it.
func ProviderBond(providerID string) LedgerAccount {
	return LedgerAccount("provider:" + providerID + ":bond")
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
	TransferHold   TransferKind = "hold"   // renter available → held, once, when a lease is placed
	TransferSettle TransferKind = "settle" // held → provider pending + fees, rest back to available
	// TransferMature makes one settlement's earnings payable once the
	// payout hold has passed: provider pending → payable.
	TransferMature TransferKind = "mature"
	// TransferPayout moves a requested payout out of reach: provider
	// payable → payout (in flight).
	TransferPayout TransferKind = "payout"
	// TransferPayoutSettle records that the money left the market: provider
	// payout → world.
	TransferPayoutSettle TransferKind = "payout_settle"
	// TransferPayoutReject returns a rejected payout: provider payout → payable.
	TransferPayoutReject TransferKind = "payout_reject"
	// TransferBond stakes a provider's money: world or provider payable →
	// provider bond.
	TransferBond TransferKind = "bond"
	// TransferPenalty takes a penalty from a provider's bond: provider bond
	// → market penalties, or → the harmed renter's available balance when
	// the trust policy gives it to the renter.
	TransferPenalty TransferKind = "penalty"
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
	// GPUSeconds is what a settlement billed: the GPU-seconds the charge
	// is for (zero when the provider was at fault). Statements add it up.
	GPUSeconds int64     `json:"gpu_seconds,omitempty"`
	Memo       string    `json:"memo,omitempty"`
	Entries    []Entry   `json:"entries"`
	CreatedAt  time.Time `json:"created_at"`
}

// Validate checks that t balances and names its accounts.
func (t *Transfer) Validate() error {
	if t.IdempotencyKey == "" {
		return Invalid("transfer.idempotency_key", "required")
	} else if len(t.Entries) < 2 {
		return Invalid("transfer.entries", "a transfer needs at least two entries")
	} else if t.GPUSeconds < 0 {
		return Invalid("transfer.gpu_seconds", "must not be negative")
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

// OtherAccounts stands, in a transfer shown to an account holder (SeenBy),
// for every account not theirs.
const OtherAccounts LedgerAccount = "others"

// SeenBy is t as the holder of accountID may see it: its entries on their
// own accounts, and the rest summed into one entry on OtherAccounts, so
// that it still balances and names nobody else. A batch of metered
// inference is one transfer for many renters and providers.
func (t *Transfer) SeenBy(accountID string) *Transfer {
	seen := *t
	seen.Entries = nil
	var others Micros
	for _, e := range t.Entries {
		if e.Account.Owner() == accountID {
			seen.Entries = append(seen.Entries, e)
		} else {
			others += e.Amount
		}
	}
	if others != 0 || len(seen.Entries) < len(t.Entries) {
		seen.Entries = append(seen.Entries, Entry{Account: OtherAccounts, Amount: others})
	}
	if t.Parties() > 2 {
		// A metered batch's memo sums every renter's requests in it.
		seen.Memo = string(t.Kind) + ": one posting of several accounts; the others' lines are summed in " + string(OtherAccounts)
	}
	return &seen
}

// Parties is how many account holders the transfer's entries name, the
// platform's own accounts aside: two for a lease's settlement (its renter
// and provider), more for a batch of metered inference.
func (t *Transfer) Parties() int {
	seen := map[string]bool{}
	for _, e := range t.Entries {
		if o := e.Account.Owner(); o != "" {
			seen[o] = true
		}
	}
	return len(seen)
}

// Balance is one account holder's money. A renter has the first three; a
// provider the rest.
type Balance struct {
	AccountID string `json:"account_id"`
	Available Micros `json:"available_micros"`
	Held      Micros `json:"held_micros"`
	Spent     Micros `json:"spent_micros"` // charged to this renter so far, for leases and inference

	Pending        Micros `json:"pending_micros"`          // earned, inside the payout hold
	Payable        Micros `json:"payable_micros"`          // earned, may be paid out
	PayoutInFlight Micros `json:"payout_in_flight_micros"` // requested payouts not yet settled
	PaidOut        Micros `json:"paid_out_micros"`         // settled payouts, all time
	Bond           Micros `json:"bond_micros"`             // staked against penalties
}

// LeaseEarnings is what a lease earned its provider and where those
// earnings stand: credited to the provider's pending account when the
// lease settled, and moved to payable once the payout hold is over. Until
// then an upheld dispute about the lease may refund them to the harmed
// renter (docs/trust.md, "Penalties"); what matures is the rest.
type LeaseEarnings struct {
	LeaseID  string
	Earned   Micros // credited to the provider by the lease's settlement; 0 before it settles
	Refunded Micros // given back to the renter by upheld disputes
	Matured  bool   // the rest is payable: nothing more may be refunded
	// Fee is the platform's fee of the settlement, and FeeRefunded what
	// upheld disputes gave back of it to the renter: the market keeps no
	// fee for work a dispute proved bad, whether the earnings matured or
	// not.
	Fee, FeeRefunded Micros
}

// Refundable is what of the earnings a dispute may still refund: what is
// still pending.
func (e *LeaseEarnings) Refundable() Micros {
	if e.Matured {
		return 0
	}
	return max(0, e.Earned-e.Refunded)
}

// FeeRefundable is what of the platform's fee a dispute may still refund.
func (e *LeaseEarnings) FeeRefundable() Micros { return max(0, e.Fee-e.FeeRefunded) }

// TransferFilter selects transfers.
type TransferFilter struct {
	AccountID string // any entry on an account owned by this ID
	LeaseID   string
	Kinds     []TransferKind
	ID        string // only this transfer
	// Before pages: the transfers listed after this one, newest first;
	// none when it is not one of those the rest of the filter selects.
	Before string
	Limit  int
}
