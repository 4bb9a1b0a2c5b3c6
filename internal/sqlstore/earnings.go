package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

// refundedSum is the SQL for what upheld disputes refunded to renters of
// the earnings of the lease whose ID is leaseID (a column or a parameter):
// the debits of providers' pending accounts in penalties about the lease
// (ledger.Refund).
func refundedSum(leaseID string) string {
	return `(SELECT COALESCE(SUM(-e.amount), 0) FROM transfers r JOIN ledger_entries e ON e.transfer_id = r.id
		WHERE ` + leaseID + ` <> '' AND r.lease_id = ` + leaseID + ` AND r.kind = 'penalty'
		AND e.account LIKE 'provider:%:pending' AND e.amount < 0)`
}

// feeRefundedSum is refundedSum for the platform's fee: the debits of
// platform:fees in penalties about the lease (ledger.RefundFee).
func feeRefundedSum(leaseID string) string {
	return `(SELECT COALESCE(SUM(-e.amount), 0) FROM transfers r JOIN ledger_entries e ON e.transfer_id = r.id
		WHERE ` + leaseID + ` <> '' AND r.lease_id = ` + leaseID + ` AND r.kind = 'penalty'
		AND e.account = '` + string(idlegrid.PlatformFees) + `' AND e.amount < 0)`
}

// LeaseEarnings returns what the lease's settlement credited its provider,
// what disputes refunded of it, and whether the rest matured.
func (db *DB) LeaseEarnings(ctx context.Context, leaseID string) (*idlegrid.LeaseEarnings, error) {
	var out *idlegrid.LeaseEarnings
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = leaseEarnings(ctx, tx, leaseID, "")
		return err
	})
	return out, err
}

// leaseEarnings reads a lease's earnings in tx, locking its settlement's
// row with lock (FOR UPDATE, on PostgreSQL), so that a refund and the
// maturing of the same earnings take turns.
func leaseEarnings(ctx context.Context, tx *sql.Tx, leaseID, lock string) (*idlegrid.LeaseEarnings, error) {
	e := &idlegrid.LeaseEarnings{LeaseID: leaseID}
	settleKey := "settle:" + leaseID
	var id string
	err := tx.QueryRowContext(ctx, `SELECT id FROM transfers WHERE idempotency_key = $1`+lock, settleKey).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return e, nil
	} else if err != nil {
		return nil, err
	}
	settle, err := findTransferByKey(ctx, tx, settleKey)
	if err != nil {
		return nil, err
	}
	e.Earned, e.Fee = ledger.Earned(settle), ledger.Fee(settle)
	err = tx.QueryRowContext(ctx, `SELECT `+refundedSum("$1")+`, `+feeRefundedSum("$1")+`,
		EXISTS (SELECT 1 FROM transfers WHERE idempotency_key = $2)`, leaseID, ledger.MatureKey(settleKey)).Scan(&e.Refunded, &e.FeeRefunded, &e.Matured)
	return e, err
}

// checkLeaseEarnings makes sure that t, when it takes a lease's earnings
// out of its provider's pending account (a dispute's refund, or the
// settlement's maturing), takes no more than is left of them: a refund
// only before they mature, and with the maturing never more in all than
// the settlement credited; and that a dispute's refund of the platform's
// fee on the lease takes no more than is left of that fee. It holds the
// settlement's row until tx ends.
func (db *DB) checkLeaseEarnings(ctx context.Context, tx *sql.Tx, t *idlegrid.Transfer) error {
	taken, fee := pendingTaken(t), feeTaken(t)
	if t == nil || t.LeaseID == "" || taken == 0 && fee == 0 {
		return nil
	}
	e, err := leaseEarnings(ctx, tx, t.LeaseID, db.dialect.forUpdate)
	if err != nil {
		return err
	}
	switch {
	case taken > 0 && t.Kind == idlegrid.TransferPenalty && e.Matured:
		return idlegrid.Errorf(idlegrid.ECONFLICT, "the earnings of lease %s matured meanwhile and can no longer be refunded: try again", t.LeaseID)
	case e.Refunded+taken > e.Earned:
		return idlegrid.Errorf(idlegrid.ECONFLICT, "%s takes %s of lease %s's earnings, of which %s are left (%s earned, %s refunded): try again",
			t.IdempotencyKey, taken, t.LeaseID, e.Earned-e.Refunded, e.Earned, e.Refunded)
	case e.FeeRefunded+fee > e.Fee:
		return idlegrid.Errorf(idlegrid.ECONFLICT, "%s refunds %s of the platform's fee on lease %s, of which %s are left (%s charged, %s refunded): try again",
			t.IdempotencyKey, fee, t.LeaseID, e.Fee-e.FeeRefunded, e.Fee, e.FeeRefunded)
	}
	return nil
}

// feeTaken is what t, a penalty, takes out of the platform's fees.
func feeTaken(t *idlegrid.Transfer) idlegrid.Micros {
	if t == nil || t.Kind != idlegrid.TransferPenalty {
		return 0
	}
	return ledger.FeeRefunded(t)
}

// pendingTaken is what t takes out of providers' pending accounts.
func pendingTaken(t *idlegrid.Transfer) idlegrid.Micros {
	if t == nil || (t.Kind != idlegrid.TransferPenalty && t.Kind != idlegrid.TransferMature) {
		return 0
	}
	var total idlegrid.Micros
	for _, e := range t.Entries {
		if e.Amount < 0 && e.Account.Owner() != "" && e.Account == idlegrid.ProviderPending(e.Account.Owner()) {
			total -= e.Amount
		}
	}
	return total
}
