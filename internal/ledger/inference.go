package ledger

import (
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Inference (key "inference:<request>"): one metered gateway request, paid
// from the renter's available balance at once. The gateway reserves the
// request's worst case in memory while it runs (internal/gateway), so the
// posting is the charge alone; no escrow moves.
//
//	renter available      −charge
//	provider pending      +(charge − fee)
//	platform fees         +fee
//
// It returns the fee, and a nil transfer when the charge is zero.
func (r Rules) Inference(u *idlegrid.InferenceUsage, at time.Time) (fee idlegrid.Micros, t *idlegrid.Transfer) {
	if u.ChargeMicros <= 0 {
		return 0, nil
	}
	fee = r.Fee(u.ChargeMicros)
	entries := []idlegrid.Entry{{Account: idlegrid.RenterAvailable(u.RenterID), Amount: -u.ChargeMicros}}
	if earned := u.ChargeMicros - fee; earned > 0 {
		entries = append(entries, idlegrid.Entry{Account: idlegrid.ProviderPending(u.ProviderID), Amount: earned})
	}
	if fee > 0 {
		entries = append(entries, idlegrid.Entry{Account: idlegrid.PlatformFees, Amount: fee})
	}
	return fee, &idlegrid.Transfer{
		ID:             idlegrid.NewID("tr"),
		IdempotencyKey: "inference:" + u.ID,
		Kind:           idlegrid.TransferInference,
		Memo: fmt.Sprintf("inference %s on %s: %d in + %d out tokens (%s), fee %s",
			u.Model, u.NodeID, u.InputTokens, u.OutputTokens, u.Source, fee),
		Entries:   entries,
		CreatedAt: at,
	}
}
