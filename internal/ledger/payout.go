package ledger

import (
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// MaxPayoutMicros is the most one payout may move: 10,000,000 units.
const MaxPayoutMicros = 10_000_000 * idlegrid.MicrosPerUnit

// MatureKey is the idempotency key of the transfer that matures the
// settlement whose key is settleKey. One settlement matures once.
func MatureKey(settleKey string) string { return "mature:" + settleKey }

// Mature returns the transfer that makes the provider earnings of one
// settlement payable: each credit to a provider's pending account moves to
// that provider's payable account, less refunded, what upheld disputes
// gave back to the harmed renter of those earnings while they were
// pending (Refund). It is nil when the settlement credited no provider (a
// provider at fault, or a fee of 100%), or nothing of its credit is left.
func Mature(settle *idlegrid.Transfer, refunded idlegrid.Micros, at time.Time) *idlegrid.Transfer {
	t := &idlegrid.Transfer{
		ID:             idlegrid.NewID("tr"),
		IdempotencyKey: MatureKey(settle.IdempotencyKey),
		Kind:           idlegrid.TransferMature,
		LeaseID:        settle.LeaseID,
		CreatedAt:      at,
	}
	var total idlegrid.Micros
	for _, e := range settle.Entries {
		provider, ok := pendingOwner(e.Account)
		if !ok || e.Amount <= 0 {
			continue
		}
		taken := min(max(refunded, 0), e.Amount)
		refunded -= taken
		if left := e.Amount - taken; left > 0 {
			total += left
			t.Entries = append(t.Entries,
				idlegrid.Entry{Account: e.Account, Amount: -left},
				idlegrid.Entry{Account: idlegrid.ProviderPayable(provider), Amount: left})
		}
	}
	if len(t.Entries) == 0 {
		return nil
	}
	t.Memo = fmt.Sprintf("earnings of %s payable: %s", settle.IdempotencyKey, total)
	return t
}

// Earned is what a settlement credited to providers' pending accounts.
func Earned(settle *idlegrid.Transfer) idlegrid.Micros {
	var total idlegrid.Micros
	for _, e := range settle.Entries {
		if _, ok := pendingOwner(e.Account); ok && e.Amount > 0 {
			total += e.Amount
		}
	}
	return total
}

// Fee is what settlement settle credited the platform: its fee on the
// lease.
func Fee(settle *idlegrid.Transfer) idlegrid.Micros {
	var total idlegrid.Micros
	for _, e := range settle.Entries {
		if e.Account == idlegrid.PlatformFees && e.Amount > 0 {
			total += e.Amount
		}
	}
	return total
}

// pendingOwner returns the provider of a pending account.
func pendingOwner(a idlegrid.LedgerAccount) (string, bool) {
	if strings.HasPrefix(string(a), "provider:") && strings.HasSuffix(string(a), ":pending") {
		return a.Owner(), a.Owner() != ""
	}
	return "", false
}

// CheckPayout checks a payout request before it is stored.
func CheckPayout(p *idlegrid.Payout) error {
	switch {
	case p.ID == "":
		return idlegrid.Invalid("payout.id", "required")
	case p.ProviderID == "":
		return idlegrid.Invalid("payout.provider_id", "required")
	case p.AmountMicros <= 0 || p.AmountMicros > MaxPayoutMicros:
		return idlegrid.Invalid("payout.amount_micros", "must be between 1 micro and %s, got %d", MaxPayoutMicros, p.AmountMicros)
	}
	return CheckIdempotencyKey("payout.idempotency_key", p.IdempotencyKey)
}

// RequestPayout returns the transfer that puts a requested payout in
// flight: provider payable → payout.
func RequestPayout(p *idlegrid.Payout, at time.Time) (*idlegrid.Transfer, error) {
	if err := CheckPayout(p); err != nil {
		return nil, err
	}
	return &idlegrid.Transfer{
		ID:             idlegrid.NewID("tr"),
		IdempotencyKey: "payout:" + p.ID,
		Kind:           idlegrid.TransferPayout,
		Memo:           fmt.Sprintf("payout %s of %s requested", p.ID, p.AmountMicros),
		Entries: []idlegrid.Entry{
			{Account: idlegrid.ProviderPayable(p.ProviderID), Amount: -p.AmountMicros},
			{Account: idlegrid.ProviderPayout(p.ProviderID), Amount: p.AmountMicros},
		},
		CreatedAt: at,
	}, nil
}

// ResolvePayout returns the transfer that settles a payout in flight
// (payout → world: the money has left the market) or rejects it (payout →
// payable). The payout must be requested.
func ResolvePayout(p *idlegrid.Payout, to idlegrid.PayoutState, at time.Time) (*idlegrid.Transfer, error) {
	if p.State != idlegrid.PayoutRequested {
		return nil, idlegrid.Errorf(idlegrid.ECONFLICT, "payout %s is %s, not requested", p.ID, p.State)
	}
	t := &idlegrid.Transfer{ID: idlegrid.NewID("tr"), CreatedAt: at}
	var dest idlegrid.LedgerAccount
	switch to {
	case idlegrid.PayoutSettled:
		t.IdempotencyKey, t.Kind, dest = "payout-settle:"+p.ID, idlegrid.TransferPayoutSettle, idlegrid.WorldAccount
		t.Memo = fmt.Sprintf("payout %s of %s settled", p.ID, p.AmountMicros)
	case idlegrid.PayoutRejected:
		t.IdempotencyKey, t.Kind, dest = "payout-reject:"+p.ID, idlegrid.TransferPayoutReject, idlegrid.ProviderPayable(p.ProviderID)
		t.Memo = fmt.Sprintf("payout %s of %s rejected; payable again", p.ID, p.AmountMicros)
	default:
		return nil, idlegrid.Invalid("payout.state", "a payout is settled or rejected, not %q", to)
	}
	t.Entries = []idlegrid.Entry{
		{Account: idlegrid.ProviderPayout(p.ProviderID), Amount: -p.AmountMicros},
		{Account: dest, Amount: p.AmountMicros},
	}
	return t, nil
}

// BondSource says where a provider's bond comes from.
type BondSource int

const (
	BondFromWorld   BondSource = iota // a deposit from outside the market
	BondFromPayable                   // the provider's own payable earnings
)

// Bond returns the transfer that stakes amount as the provider's bond.
func Bond(providerID string, amount idlegrid.Micros, from BondSource, key string, at time.Time) (*idlegrid.Transfer, error) {
	if err := checkProviderMove("bond", providerID, amount, key); err != nil {
		return nil, err
	}
	src := idlegrid.WorldAccount
	if from == BondFromPayable {
		src = idlegrid.ProviderPayable(providerID)
	}
	return providerMove(idlegrid.TransferBond, "bond:"+providerID+":"+key,
		fmt.Sprintf("bond of %s staked", amount), src, idlegrid.ProviderBond(providerID), amount, at), nil
}

// Penalty returns the transfer that takes amount from the provider's bond
// into the market's penalties account, for reason.
func Penalty(providerID string, amount idlegrid.Micros, reason, key string, at time.Time) (*idlegrid.Transfer, error) {
	if err := checkProviderMove("penalty", providerID, min(amount, MaxPayoutMicros), key); err != nil { // no ceiling but the bond, as Slash
		return nil, err
	} else if reason == "" {
		return nil, idlegrid.Invalid("penalty.reason", "required")
	}
	return providerMove(idlegrid.TransferPenalty, "penalty:"+providerID+":"+key,
		fmt.Sprintf("penalty of %s: %s", amount, reason), idlegrid.ProviderBond(providerID), idlegrid.MarketPenalties, amount, at), nil
}

// ReleaseBond returns the transfer that gives amount of the provider's bond
// back to its payable account.
func ReleaseBond(providerID string, amount idlegrid.Micros, key string, at time.Time) (*idlegrid.Transfer, error) {
	if err := checkProviderMove("release", providerID, amount, key); err != nil {
		return nil, err
	}
	return providerMove(idlegrid.TransferBond, "release:"+providerID+":"+key,
		fmt.Sprintf("bond of %s released", amount), idlegrid.ProviderBond(providerID), idlegrid.ProviderPayable(providerID), amount, at), nil
}

func checkProviderMove(what, providerID string, amount idlegrid.Micros, key string) error {
	switch {
	case providerID == "":
		return idlegrid.Invalid(what+".provider_id", "required")
	case amount <= 0 || amount > MaxPayoutMicros:
		return idlegrid.Invalid(what+".amount_micros", "must be between 1 micro and %s, got %d", MaxPayoutMicros, amount)
	}
	return CheckIdempotencyKey(what+".idempotency_key", key)
}

func providerMove(kind idlegrid.TransferKind, key, memo string, from, to idlegrid.LedgerAccount, amount idlegrid.Micros, at time.Time) *idlegrid.Transfer {
	return &idlegrid.Transfer{
		ID: idlegrid.NewID("tr"), IdempotencyKey: key, Kind: kind, Memo: memo,
		Entries:   []idlegrid.Entry{{Account: from, Amount: -amount}, {Account: to, Amount: amount}},
		CreatedAt: at,
	}
}
