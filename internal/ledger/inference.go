package ledger

import (
	"fmt"
	"slices"
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

// InferenceBatch (key "inference-batch:<first request>"): the inference
// transfers of a batch of metered requests, posted as one. Each account's
// entries are summed, in account order, so a batch of one renter's
// requests to one provider is three entries and one audit entry however
// many requests it holds, where a posting per request would cost the
// ledger three entries and an audit entry each. first names the batch's
// first request, whose ID no other batch holds. Every request's usage row
// names the posting that charged it (idlegrid.InferenceUsage.TransferID).
// A batch of one is the request's own transfer, unchanged. It returns nil
// when ts is empty.
//
// The store posts a batch so only when it records exactly as the
// requests' own transfers would one by one (internal/sqlstore,
// RecordInference): the same balances, no account that may not go
// negative both debited and credited, none overdrawn.
func InferenceBatch(ts []*idlegrid.Transfer, first string) *idlegrid.Transfer {
	switch len(ts) {
	case 0:
		return nil
	case 1:
		return ts[0]
	}
	var all []idlegrid.Entry
	var at time.Time
	var charged idlegrid.Micros
	for _, t := range ts {
		for _, e := range t.Entries {
			all = append(all, e)
			if e.Amount < 0 {
				charged -= e.Amount
			}
		}
		if t.CreatedAt.After(at) {
			at = t.CreatedAt
		}
	}
	entries := slices.DeleteFunc(Net(all), func(e idlegrid.Entry) bool { return e.Amount == 0 })
	return &idlegrid.Transfer{
		ID:             idlegrid.NewID("tr"),
		IdempotencyKey: "inference-batch:" + first,
		Kind:           idlegrid.TransferInference,
		Memo:           fmt.Sprintf("inference: %d requests, %s charged", len(ts), charged),
		Entries:        entries,
		CreatedAt:      at,
	}
}
