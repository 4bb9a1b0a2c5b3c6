// Package ledger holds the posting rules of idlegrid: which balanced
// transfers a top-up, a placement, the end of a lease, a maturing
// settlement, a payout and a penalty produce, and how a month of
// settlements adds up to a statement. It is pure: it builds
// *idlegrid.Transfer values and never stores them. The store applies each
// transfer atomically with the change that caused it, refuses one that would
// take an account other than the world below zero (EPAYMENT), and treats a
// transfer whose idempotency key it has seen as already applied.
//
// # Accounts
//
//	world                     where money enters and leaves; the only account that goes negative
//	renter:<id>:available     what the renter can spend
//	renter:<id>:held          the renter's money in escrow for live leases
//	provider:<id>:pending     earned, inside the payout hold
//	provider:<id>:payable     earned, may be paid out
//	provider:<id>:payout      requested payouts, in flight
//	provider:<id>:bond        staked against penalties
//	platform:fees             the platform's share of every charge
//	market:penalties          what providers forfeited from their bonds
//
// A balance is the sum of its account's entries. Every transfer sums to
// zero, so all balances together always sum to zero: money is only ever
// moved, never made or lost.
//
// # Posting rules
//
// Top-up (key "topup:<renter>:<caller key>"): the renter's payment arrives.
//
//	world                 −amount
//	renter available      +amount
//
// Hold (key "hold:<lease>"), when a lease is placed: the price locked at
// placement times the lease's GPUs times its time limit, rounded down to
// the micro (HoldFor), moves into escrow.
//
//	renter available      −hold
//	renter held           +hold
//
// Settle (key "settle:<lease>"), when the lease ends: the charge is the
// locked price times the GPU-seconds billed, rounded down, and never more
// than the hold. When the provider caused the failure (FaultProvider) the
// charge is zero: the renter gets everything back and the node earns
// nothing for the failed span. The fee is the platform's basis points of the
// charge, rounded down, so any fraction of a micro goes to the provider.
// The provider's share is pending until the payout hold has passed.
//
//	renter held           −hold
//	provider pending      +(charge − fee)
//	platform fees         +fee
//	renter available      +(hold − charge)
//
// Mature (key "mature:<settlement key>"), once per settlement, when the
// payout hold has passed since it: provider pending → payable.
//
// Payout (key "payout:<payout>"), when a provider asks to be paid:
// provider payable → payout. Settled (key "payout-settle:<payout>"): payout
// → world, the money has left. Rejected (key "payout-reject:<payout>"):
// payout → payable.
//
// Bond (key "bond:<provider>:<caller key>"): world (a deposit) or the
// provider's payable → bond. Penalty (key "penalty:<provider>:<caller key>"):
// bond → market penalties. Release (key "release:<provider>:<caller key>"):
// bond → payable.
//
// Entries of zero are left out; a transfer always keeps at least two.
// Amounts never go through floating point.
package ledger

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
)

// MaxTopUpMicros is the most one top-up may add: 1,000,000 units. It keeps
// a typo from minting a fortune and every sum far from overflow.
const MaxTopUpMicros = 1_000_000 * idlegrid.MicrosPerUnit

// maxIdempotencyKey is the longest caller-supplied idempotency key.
const maxIdempotencyKey = 200

// basisPoints is one whole in basis points (1/100 of a percent).
const basisPoints = 10_000

// Rules are the market's posting parameters.
type Rules struct {
	// FeeBasisPoints is the platform's share of every charge, in 1/100 of a
	// percent: 1000 is 10%. Between 0 and 10000.
	FeeBasisPoints int64
}

// Validate checks the rules.
func (r Rules) Validate() error {
	if r.FeeBasisPoints < 0 || r.FeeBasisPoints > basisPoints {
		return idlegrid.Invalid("ledger.fee_basis_points", "must be between 0 and 10000 (100%%), got %d", r.FeeBasisPoints)
	}
	return nil
}

// Fee returns the platform's share of charge, rounded down. Rules outside
// 0..10000 are clamped, so that no posting ever has a negative line.
func (r Rules) Fee(charge idlegrid.Micros) idlegrid.Micros {
	bps := idlegrid.Micros(min(max(r.FeeBasisPoints, 0), basisPoints))
	// Split so that charge*bps cannot overflow; exact for charge ≥ 0.
	return charge/basisPoints*bps + charge%basisPoints*bps/basisPoints
}

// CheckIdempotencyKey checks a caller's idempotency key: required, so that
// a retried call is applied once, and at most 200 characters.
func CheckIdempotencyKey(field, key string) error {
	if key == "" {
		return idlegrid.Invalid(field, "required, so that a retried call is applied once")
	} else if len(key) > maxIdempotencyKey {
		return idlegrid.Invalid(field, "at most %d characters", maxIdempotencyKey)
	} else if !idlegrid.IsText(key) {
		return idlegrid.Invalid(field, "must be UTF-8 text without the NUL character")
	}
	return nil
}

// TopUp returns the transfer that credits amount to the renter. The
// idempotency key is the caller's (e.g. a payment ID), scoped to the renter
// so that two renters' keys can never collide.
func TopUp(renterID string, amount idlegrid.Micros, idempotencyKey string, at time.Time) (*idlegrid.Transfer, error) {
	switch {
	case renterID == "":
		return nil, idlegrid.Invalid("topup.renter_id", "required")
	case amount <= 0 || amount > MaxTopUpMicros:
		return nil, idlegrid.Invalid("topup.amount_micros", "must be between 1 micro and %s, got %d", MaxTopUpMicros, amount)
	}
	if err := CheckIdempotencyKey("topup.idempotency_key", idempotencyKey); err != nil {
		return nil, err
	}
	return &idlegrid.Transfer{
		ID:             idlegrid.NewID("tr"),
		IdempotencyKey: "topup:" + renterID + ":" + idempotencyKey,
		Kind:           idlegrid.TransferTopUp,
		Memo:           fmt.Sprintf("top-up of %s", amount),
		Entries: []idlegrid.Entry{
			{Account: idlegrid.WorldAccount, Amount: -amount},
			{Account: idlegrid.RenterAvailable(renterID), Amount: amount},
		},
		CreatedAt: at,
	}, nil
}

// HoldFor is the escrow a lease needs: price per GPU-hour for gpus GPUs
// over limitSeconds, rounded down to the micro.
func HoldFor(price idlegrid.Micros, gpus int, limitSeconds int64) idlegrid.Micros {
	return idlegrid.CostOf(price, int64(gpus)*limitSeconds)
}

// Hold returns the transfer that escrows l.HoldMicros from the renter when l
// is placed, or nil when the hold is zero and there is nothing to move.
func Hold(l *idlegrid.Lease, at time.Time) *idlegrid.Transfer {
	if l.HoldMicros <= 0 {
		return nil
	}
	return &idlegrid.Transfer{
		ID:             idlegrid.NewID("tr"),
		IdempotencyKey: "hold:" + l.ID,
		Kind:           idlegrid.TransferHold,
		LeaseID:        l.ID,
		Memo: fmt.Sprintf("hold for lease %s: %d GPU x %d s at %s/GPU-h",
			l.ID, len(l.GPUUUIDs), l.LimitSeconds, l.PriceMicrosPerGPUHour),
		Entries: []idlegrid.Entry{
			{Account: idlegrid.RenterAvailable(l.RenterID), Amount: -l.HoldMicros},
			{Account: idlegrid.RenterHeld(l.RenterID), Amount: l.HoldMicros},
		},
		CreatedAt: at,
	}
}

// Charge is what the renter pays for gpuSeconds of l: the locked price times
// the GPU-seconds, rounded down, at most the hold; zero when the provider is
// at fault.
func Charge(l *idlegrid.Lease, gpuSeconds int64, fault idlegrid.Fault) idlegrid.Micros {
	if fault == idlegrid.FaultProvider || gpuSeconds <= 0 || l.HoldMicros <= 0 {
		return 0
	}
	return min(idlegrid.CostOf(l.PriceMicrosPerGPUHour, gpuSeconds), l.HoldMicros)
}

// Settle returns what the renter is charged for l and the transfer that
// releases its hold: the charge less the fee to the provider, the fee to the
// platform, the rest back to the renter. The transfer is nil when the hold
// is zero.
func (r Rules) Settle(l *idlegrid.Lease, gpuSeconds int64, fault idlegrid.Fault, at time.Time) (charge idlegrid.Micros, t *idlegrid.Transfer) {
	if l.HoldMicros <= 0 {
		return 0, nil
	}
	charge = Charge(l, gpuSeconds, fault)
	fee := r.Fee(charge)
	t = &idlegrid.Transfer{
		ID:             idlegrid.NewID("tr"),
		IdempotencyKey: "settle:" + l.ID,
		Kind:           idlegrid.TransferSettle,
		LeaseID:        l.ID,
		GPUSeconds:     billedSeconds(l, gpuSeconds, fault),
		Memo:           settleMemo(l, gpuSeconds, fault, charge, fee),
		CreatedAt:      at,
	}
	t.Entries = nonZero(
		idlegrid.Entry{Account: idlegrid.RenterHeld(l.RenterID), Amount: -l.HoldMicros},
		idlegrid.Entry{Account: idlegrid.ProviderPending(l.ProviderID), Amount: charge - fee},
		idlegrid.Entry{Account: idlegrid.PlatformFees, Amount: fee},
		idlegrid.Entry{Account: idlegrid.RenterAvailable(l.RenterID), Amount: l.HoldMicros - charge},
	)
	return charge, t
}

// billedSeconds is what a settlement is for: the GPU-seconds that ran, none
// when the provider is at fault, and never beyond the lease's limit.
func billedSeconds(l *idlegrid.Lease, gpuSeconds int64, fault idlegrid.Fault) int64 {
	if fault == idlegrid.FaultProvider || gpuSeconds <= 0 {
		return 0
	}
	return min(gpuSeconds, l.LimitSeconds*int64(len(l.GPUUUIDs)))
}

func settleMemo(l *idlegrid.Lease, gpuSeconds int64, fault idlegrid.Fault, charge, fee idlegrid.Micros) string {
	if fault == idlegrid.FaultProvider {
		return fmt.Sprintf("settle lease %s: provider at fault, nothing charged, %s released", l.ID, l.HoldMicros)
	}
	return fmt.Sprintf("settle lease %s: %d GPU-s at %s/GPU-h, %s charged (fee %s), %s released",
		l.ID, max(gpuSeconds, 0), l.PriceMicrosPerGPUHour, charge, fee, l.HoldMicros-charge)
}

func nonZero(entries ...idlegrid.Entry) []idlegrid.Entry {
	out := entries[:0]
	for _, e := range entries {
		if e.Amount != 0 {
			out = append(out, e)
		}
	}
	return out
}

// Net sums entries per account, in account order, as an inference batch
// posts them (InferenceBatch). An account whose entries cancel out keeps
// its entry, of 0.
func Net(entries []idlegrid.Entry) []idlegrid.Entry {
	sums := map[idlegrid.LedgerAccount]idlegrid.Micros{}
	for _, e := range entries {
		sums[e.Account] += e.Amount
	}
	out := make([]idlegrid.Entry, 0, len(sums))
	for _, acct := range slices.Sorted(maps.Keys(sums)) {
		out = append(out, idlegrid.Entry{Account: acct, Amount: sums[acct]})
	}
	return out
}
