package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

var _ idlegrid.DisputeStore = (*DB)(nil)

const disputeColumns = `id, offence, state, provider_id, node_id, lease_id, renter_id, evidence, detail,
	harm_micros, penalty_micros, penalty_to, transfer_id, resolution, resolved_by, policy_sha256, created_at, resolved_at,
	idempotency_key, request_sha256, refund_micros, fee_refund_micros`

func scanDispute(s scanner) (*idlegrid.Dispute, error) {
	var d idlegrid.Dispute
	var created, resolved sql.NullInt64
	var detail string
	if err := s.Scan(&d.ID, &d.Offence, &d.State, &d.ProviderID, &d.NodeID, &d.LeaseID, &d.RenterID,
		&d.Evidence, &detail, &d.HarmMicros, &d.PenaltyMicros, &d.PenaltyTo, &d.TransferID,
		&d.Resolution, &d.ResolvedBy, &d.PolicySHA256, &created, &resolved, &d.IdempotencyKey, &d.RequestSHA256, &d.RefundMicros, &d.FeeRefundMicros); err != nil {
		return nil, err
	}
	d.CreatedAt, d.ResolvedAt = timeOf(created), timePtrOf(resolved)
	if detail != "" {
		d.Detail = json.RawMessage(detail)
	}
	return &d, nil
}

func findDispute(ctx context.Context, tx *sql.Tx, id, lock string) (*idlegrid.Dispute, error) {
	d, err := scanDispute(tx.QueryRowContext(ctx, `SELECT `+disputeColumns+` FROM disputes WHERE id = $1`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("dispute", id)
	}
	return d, err
}

func checkDispute(d *idlegrid.Dispute, penalty *idlegrid.Transfer) error {
	switch {
	case d.ID == "" || d.ProviderID == "" || d.Offence == "":
		return idlegrid.Invalid("dispute", "id, offence and provider_id are required")
	case d.State != idlegrid.DisputeOpen && d.State != idlegrid.DisputeUpheld:
		return idlegrid.Invalid("dispute.state", "a dispute opens as open or upheld, not %q", d.State)
	case d.Evidence == "":
		return idlegrid.Invalid("dispute.evidence", "required: say what was found")
	case d.CreatedAt.IsZero():
		return idlegrid.Invalid("dispute.created_at", "required")
	case penalty != nil && d.State != idlegrid.DisputeUpheld:
		return idlegrid.Invalid("dispute.penalty", "only an upheld dispute takes a penalty")
	case d.HarmMicros < 0 || d.PenaltyMicros < 0:
		return idlegrid.Invalid("dispute.penalty_micros", "must not be negative")
	}
	return checkPenalty(d.ProviderID, d.PenaltyMicros, penalty)
}

// checkPenalty makes sure penalty takes exactly amount out of the
// provider's bond (nothing when amount is 0, the transfer then only
// refunding the renter from the provider's pending earnings: Refund), or
// that there is no penalty when amount is 0.
func checkPenalty(providerID string, amount idlegrid.Micros, penalty *idlegrid.Transfer) error {
	if penalty == nil {
		if amount != 0 {
			return idlegrid.Invalid("dispute.penalty", "a penalty of %s needs its transfer", amount)
		}
		return nil
	}
	if penaltyOf(providerID, penalty) != amount {
		return idlegrid.Invalid("dispute.penalty", "must take %s out of %s", amount, idlegrid.ProviderBond(providerID))
	}
	return nil
}

// OpenDispute stores d and, when it is upheld, posts its penalty in the
// same transaction. A second dispute for the same offence on the same
// lease is ECONFLICT; so is one whose idempotency key opened another,
// naming idempotency_key.
func (db *DB) OpenDispute(ctx context.Context, d *idlegrid.Dispute, penalty *idlegrid.Transfer, f *idlegrid.FollowUp) error {
	if err := checkDispute(d, penalty); err != nil {
		return err
	}
	if err := checkDisputeFollowUp(d.State, f); err != nil {
		return err
	}
	var taken bool // the insert conflicted with a stored dispute
	err := db.update(ctx, func(tx *sql.Tx) error {
		taken = false
		if err := lockAccount(ctx, tx, d.ProviderID, db.dialect.forUpdate); err != nil { // as ReleaseBond does
			return err
		}
		var resolved any
		if d.ResolvedAt != nil {
			resolved = timeArg(*d.ResolvedAt)
		}
		transferID, refund, feeRefund := "", idlegrid.Micros(0), idlegrid.Micros(0)
		if penalty != nil {
			transferID, refund, feeRefund = penalty.ID, ledger.Refunded(d.ProviderID, penalty), ledger.FeeRefunded(penalty)
			if err := db.checkLeaseEarnings(ctx, tx, penalty); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO disputes (`+disputeColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)`,
			d.ID, d.Offence, string(d.State), d.ProviderID, d.NodeID, d.LeaseID, d.RenterID, d.Evidence, string(d.Detail),
			int64(d.HarmMicros), int64(d.PenaltyMicros), d.PenaltyTo, transferID, d.Resolution, d.ResolvedBy,
			d.PolicySHA256, timeArg(d.CreatedAt), resolved, d.IdempotencyKey, d.RequestSHA256, int64(refund), int64(feeRefund))
		if err != nil {
			err = db.dialect.translate(err)
			taken = idlegrid.ErrorCode(err) == idlegrid.ECONFLICT
			return err
		}
		d.TransferID, d.RefundMicros, d.FeeRefundMicros = transferID, refund, feeRefund
		if err := appendAudit(tx)(audit.DisputeEntry(d, d.CreatedAt)); err != nil {
			return err
		}
		if err := insertFollowUp(ctx, tx, db.dialect, f); err != nil {
			return err
		}
		if penalty == nil {
			return nil
		} else if err := refundSpent(ctx, tx, d.LeaseID, refund+feeRefund, d.CreatedAt); err != nil {
			return err
		}
		return postTransfers(ctx, tx, []*idlegrid.Transfer{penalty})
	})
	if taken {
		return db.disputeTaken(ctx, d)
	}
	return err
}

// disputeTaken says what of d's is taken, after its insert conflicted:
// its idempotency key, or its lease's offence. The key is looked at
// first, since a request sent again holds its first's lease as well.
func (db *DB) disputeTaken(ctx context.Context, d *idlegrid.Dispute) error {
	if d.IdempotencyKey != "" {
		other, err := db.FindDisputeByIdempotencyKey(ctx, d.IdempotencyKey)
		if err == nil {
			return &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "idempotency_key", Message: fmt.Sprintf(
				"idempotency key %q was used for dispute %s; use a new key for a new dispute", d.IdempotencyKey, other.ID)}
		} else if idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return err
		}
	}
	if d.LeaseID == "" {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "dispute %q already exists", d.ID)
	}
	return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s already has a %s dispute", d.LeaseID, d.Offence)
}

// FindDisputeByIdempotencyKey returns the dispute opened with key.
func (db *DB) FindDisputeByIdempotencyKey(ctx context.Context, key string) (*idlegrid.Dispute, error) {
	if err := required("idempotency_key", key); err != nil {
		return nil, err
	}
	var d *idlegrid.Dispute
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		d, err = scanDispute(tx.QueryRowContext(ctx, `SELECT `+disputeColumns+` FROM disputes WHERE idempotency_key = $1`, key))
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "no dispute was opened with idempotency key %q", key)
		}
		return err
	})
	return d, err
}

// FindDispute returns the dispute with id.
func (db *DB) FindDispute(ctx context.Context, id string) (*idlegrid.Dispute, error) {
	var d *idlegrid.Dispute
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		d, err = findDispute(ctx, tx, id, "")
		return err
	})
	return d, err
}

// ListDisputes returns the disputes f selects, newest first.
func (db *DB) ListDisputes(ctx context.Context, f idlegrid.DisputeFilter) ([]*idlegrid.Dispute, error) {
	var a args
	q := `SELECT ` + disputeColumns + ` FROM disputes WHERE 1 = 1`
	if f.ProviderID != "" {
		q += ` AND provider_id = ` + a.add(f.ProviderID)
	}
	if f.RenterID != "" {
		q += ` AND renter_id = ` + a.add(f.RenterID)
	}
	if f.LeaseID != "" {
		q += ` AND lease_id = ` + a.add(f.LeaseID)
	}
	if len(f.States) > 0 {
		q += ` AND state IN ` + in(&a, f.States)
	}
	if !f.UpheldAfter.IsZero() {
		q += ` AND COALESCE(resolved_at, created_at) > ` + a.add(timeArg(f.UpheldAfter))
	}
	if f.Before != "" { // the page after Before's; none if it is not a dispute
		q += ` AND (created_at, id) < (SELECT created_at, id FROM disputes WHERE id = ` + a.add(f.Before) + `)`
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ` + a.add(limitOf(f.Limit))
	var out []*idlegrid.Dispute
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryAll(ctx, tx, scanDispute, q, a...)
		return err
	})
	return out, err
}

// ResolveDispute upholds or dismisses an open dispute, posting the
// penalty of an upheld one in the same transaction.
func (db *DB) ResolveDispute(ctx context.Context, r idlegrid.DisputeResolution) (*idlegrid.Dispute, error) {
	switch {
	case r.To != idlegrid.DisputeUpheld && r.To != idlegrid.DisputeDismissed:
		return nil, idlegrid.Invalid("dispute.state", "a dispute is upheld or dismissed, not %q", r.To)
	case r.Resolution == "":
		return nil, idlegrid.Invalid("dispute.resolution", "required: say why")
	case r.At.IsZero():
		return nil, idlegrid.Invalid("dispute.resolved_at", "required")
	case r.Penalty != nil && r.To != idlegrid.DisputeUpheld:
		return nil, idlegrid.Invalid("dispute.penalty", "only an upheld dispute takes a penalty")
	}
	if err := checkDisputeFollowUp(r.To, r.FollowUp); err != nil {
		return nil, err
	}
	var out *idlegrid.Dispute
	err := db.update(ctx, func(tx *sql.Tx) error {
		d, err := findDispute(ctx, tx, r.DisputeID, db.dialect.forUpdate)
		if err != nil {
			return err
		} else if d.State != idlegrid.DisputeOpen {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "dispute %s is already %s", d.ID, d.State)
		}
		amount, refund, feeRefund, transferID := idlegrid.Micros(0), idlegrid.Micros(0), idlegrid.Micros(0), ""
		if r.Penalty != nil {
			amount, transferID = penaltyOf(d.ProviderID, r.Penalty), r.Penalty.ID
			refund, feeRefund = ledger.Refunded(d.ProviderID, r.Penalty), ledger.FeeRefunded(r.Penalty)
		}
		if err := checkPenalty(d.ProviderID, amount, r.Penalty); err != nil {
			return err
		} else if err := db.checkLeaseEarnings(ctx, tx, r.Penalty); err != nil {
			return err
		}
		harm := max(d.HarmMicros, r.HarmMicros)
		if _, err := tx.ExecContext(ctx, `UPDATE disputes SET state = $1, resolution = $2, resolved_by = $3,
			resolved_at = $4, penalty_micros = $5, penalty_to = $6, transfer_id = $7, harm_micros = $8, refund_micros = $9, fee_refund_micros = $10 WHERE id = $11`,
			string(r.To), r.Resolution, r.By, timeArg(r.At), int64(amount), r.PenaltyTo, transferID, int64(harm), int64(refund),
			int64(feeRefund), d.ID); err != nil {
			return err
		}
		if r.Penalty != nil {
			if err := postTransfers(ctx, tx, []*idlegrid.Transfer{r.Penalty}); err != nil {
				return err
			} else if err := refundSpent(ctx, tx, d.LeaseID, refund+feeRefund, r.At); err != nil {
				return err
			}
		}
		if err := insertFollowUp(ctx, tx, db.dialect, r.FollowUp); err != nil {
			return err
		}
		if out, err = findDispute(ctx, tx, d.ID, ""); err != nil {
			return err
		}
		return appendAudit(tx)(audit.DisputeEntry(out, r.At))
	})
	return out, err
}

// penaltyOf is what t takes out of the provider's bond.
func penaltyOf(providerID string, t *idlegrid.Transfer) idlegrid.Micros {
	var taken idlegrid.Micros
	for _, e := range t.Entries {
		if e.Account == idlegrid.ProviderBond(providerID) {
			taken -= e.Amount
		}
	}
	return taken
}

// checkDisputeFollowUp checks the follow-up f (nil: none) of a dispute
// stored or resolved in state: only an upheld one has work to follow.
func checkDisputeFollowUp(state idlegrid.DisputeState, f *idlegrid.FollowUp) error {
	if f == nil {
		return nil
	}
	if state != idlegrid.DisputeUpheld {
		return idlegrid.Invalid("follow_up", "only an upheld dispute has work to follow, not a %s one", state)
	}
	return checkFollowUp(f)
}
