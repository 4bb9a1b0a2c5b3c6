package ledger

import (
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Slash returns the transfer that takes a penalty of amount from the
// provider's bond for an upheld dispute: to the harmed renter's available
// balance when renterID is set, else into the market's penalties. Its
// idempotency key is the dispute's, so a dispute is never slashed twice.
//
// Unlike a payout it has no ceiling but the bond: a bond may have been
// posted in several parts, each within MaxPayoutMicros, and a penalty takes
// its share of the whole.
func Slash(providerID, renterID string, amount idlegrid.Micros, disputeID, offence string, at time.Time) (*idlegrid.Transfer, error) {
	if err := checkProviderMove("penalty", providerID, min(amount, MaxPayoutMicros), disputeID); err != nil {
		return nil, err
	} else if offence == "" {
		return nil, idlegrid.Invalid("penalty.offence", "required")
	}
	to, who := idlegrid.MarketPenalties, "the market"
	if renterID != "" {
		to, who = idlegrid.RenterAvailable(renterID), "renter "+renterID
	}
	return providerMove(idlegrid.TransferPenalty, "slash:"+disputeID,
		fmt.Sprintf("penalty of %s for %s (dispute %s), paid to %s", amount, offence, disputeID, who),
		idlegrid.ProviderBond(providerID), to, amount, at), nil
}

// Refund adds to t, a dispute's penalty (nil when the bond paid nothing),
// the refund to the harmed renter of amount of the provider's earnings
// from the lease the dispute is about, still pending in the payout hold:
// what the bond did not pay of the harm, from money the provider could not
// withdraw yet. The settlement's maturing then moves only the rest
// (Mature). It returns t, or the transfer it makes when t is nil, under
// the dispute's key, so that the penalty and the refund are one posting,
// made once.
func Refund(t *idlegrid.Transfer, providerID, renterID, leaseID, disputeID, offence string, amount idlegrid.Micros, at time.Time) (*idlegrid.Transfer, error) {
	if providerID == "" {
		return nil, idlegrid.Invalid("refund", "a provider, a renter, a lease and a dispute are required")
	}
	t, err := refundTo(t, renterID, leaseID, disputeID, offence, amount, at)
	if err != nil {
		return nil, err
	}
	t.Entries = append(t.Entries,
		idlegrid.Entry{Account: idlegrid.ProviderPending(providerID), Amount: -amount},
		idlegrid.Entry{Account: idlegrid.RenterAvailable(renterID), Amount: amount})
	t.Memo += fmt.Sprintf("; %s of the provider's pending earnings from lease %s refunded to renter %s", amount, leaseID, renterID)
	return t, nil
}

// RefundFee adds to t, as Refund does, the refund to the harmed renter of
// amount of the platform's fee on the lease the dispute is about: what
// neither the bond nor the provider's pending earnings paid of the harm.
// The market does not keep a fee for work an upheld dispute proved bad.
func RefundFee(t *idlegrid.Transfer, renterID, leaseID, disputeID, offence string, amount idlegrid.Micros, at time.Time) (*idlegrid.Transfer, error) {
	t, err := refundTo(t, renterID, leaseID, disputeID, offence, amount, at)
	if err != nil {
		return nil, err
	}
	t.Entries = append(t.Entries,
		idlegrid.Entry{Account: idlegrid.PlatformFees, Amount: -amount},
		idlegrid.Entry{Account: idlegrid.RenterAvailable(renterID), Amount: amount})
	t.Memo += fmt.Sprintf("; %s of the platform's fee on lease %s refunded to renter %s", amount, leaseID, renterID)
	return t, nil
}

// refundTo checks a refund of amount to renterID and returns t, or a new
// penalty transfer under the dispute's key when t is nil, about the lease.
func refundTo(t *idlegrid.Transfer, renterID, leaseID, disputeID, offence string, amount idlegrid.Micros, at time.Time) (*idlegrid.Transfer, error) {
	switch {
	case renterID == "" || leaseID == "" || disputeID == "":
		return nil, idlegrid.Invalid("refund", "a provider, a renter, a lease and a dispute are required")
	case amount <= 0 || amount > MaxPayoutMicros:
		return nil, idlegrid.Invalid("refund.amount_micros", "must be between 1 micro and %s, got %d", MaxPayoutMicros, amount)
	}
	if t == nil {
		t = &idlegrid.Transfer{IdempotencyKey: "slash:" + disputeID, Kind: idlegrid.TransferPenalty,
			Memo: fmt.Sprintf("for %s (dispute %s)", offence, disputeID), CreatedAt: at}
	}
	t.LeaseID = leaseID
	return t, nil
}

// Refunded is what t, a dispute's penalty, refunds of the provider's
// pending earnings (Refund).
func Refunded(providerID string, t *idlegrid.Transfer) idlegrid.Micros {
	var total idlegrid.Micros
	for _, e := range t.Entries {
		if e.Account == idlegrid.ProviderPending(providerID) && e.Amount < 0 {
			total -= e.Amount
		}
	}
	return total
}

// FeeRefunded is what t, a dispute's penalty, refunds of the platform's
// fee (RefundFee).
func FeeRefunded(t *idlegrid.Transfer) idlegrid.Micros {
	var total idlegrid.Micros
	for _, e := range t.Entries {
		if e.Account == idlegrid.PlatformFees && e.Amount < 0 {
			total -= e.Amount
		}
	}
	return total
}
