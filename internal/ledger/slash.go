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
