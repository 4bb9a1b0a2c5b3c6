package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/idlegrid/idlegrid"
)

// ListMaturing returns the postings made at or before before that credited
// a provider's pending account (settlements of leases, and charges for
// metered inference) and have no mature transfer yet, oldest first,
// leaving out settlements all of whose earnings disputes refunded. The
// mature transfer's key ("mature:<posting's key>") is what marks a posting
// as done, so that maturing twice is impossible.
func (db *DB) ListMaturing(ctx context.Context, before time.Time, limit int) ([]*idlegrid.Transfer, error) {
	var out []*idlegrid.Transfer
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryTransfers(ctx, tx, `SELECT `+transferColumns+` FROM transfers t
			WHERE t.kind IN ($1, $2) AND t.created_at <= $3
			AND (SELECT COALESCE(SUM(e.amount), 0) FROM ledger_entries e WHERE e.transfer_id = t.id
				AND e.account LIKE 'provider:%:pending' AND e.amount > 0) > `+refundedSum("t.lease_id")+`
			AND NOT EXISTS (SELECT 1 FROM transfers m WHERE m.idempotency_key = 'mature:' || t.idempotency_key)
			ORDER BY t.created_at, t.id LIMIT $4`,
			string(idlegrid.TransferSettle), string(idlegrid.TransferInference), timeArg(before), limitOf(limit))
		return err
	})
	return out, err
}

const payoutColumns = `id, provider_id, amount_micros, state, reason, idempotency_key, resolution_key,
	resolved_by, created_at, resolved_at`

func scanPayout(s scanner) (*idlegrid.Payout, error) {
	var p idlegrid.Payout
	var created, resolved sql.NullInt64
	if err := s.Scan(&p.ID, &p.ProviderID, &p.AmountMicros, &p.State, &p.Reason, &p.IdempotencyKey,
		&p.ResolutionKey, &p.ResolvedBy, &created, &resolved); err != nil {
		return nil, err
	}
	p.CreatedAt, p.ResolvedAt = timeOf(created), timePtrOf(resolved)
	return &p, nil
}

func findPayout(ctx context.Context, tx *sql.Tx, id, lock string) (*idlegrid.Payout, error) {
	p, err := scanPayout(tx.QueryRowContext(ctx, `SELECT `+payoutColumns+` FROM payouts WHERE id = $1`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("payout", id)
	}
	return p, err
}

// CreatePayout stores a requested payout and posts t, which puts its amount
// in flight. A (provider, idempotency key) seen before changes nothing: the
// stored payout is returned, or ECONFLICT when its amount differs.
func (db *DB) CreatePayout(ctx context.Context, p *idlegrid.Payout, t *idlegrid.Transfer) (*idlegrid.Payout, error) {
	switch {
	case p.ID == "" || p.ProviderID == "" || p.IdempotencyKey == "":
		return nil, idlegrid.Invalid("payout", "id, provider_id and idempotency_key are required")
	case p.AmountMicros <= 0:
		return nil, idlegrid.Invalid("payout.amount_micros", "must be positive")
	case t == nil:
		return nil, idlegrid.Invalid("payout.transfer", "required")
	case p.CreatedAt.IsZero():
		return nil, idlegrid.Invalid("payout.created_at", "required")
	}
	var out *idlegrid.Payout
	err := db.update(ctx, func(tx *sql.Tx) error {
		if _, err := findAccount(ctx, tx, p.ProviderID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO payouts (id, provider_id, amount_micros, state, reason,
			idempotency_key, resolution_key, resolved_by, created_at, resolved_at)
			VALUES ($1, $2, $3, $4, '', $5, '', '', $6, NULL) ON CONFLICT (provider_id, idempotency_key) DO NOTHING`,
			p.ID, p.ProviderID, int64(p.AmountMicros), string(idlegrid.PayoutRequested), p.IdempotencyKey, timeArg(p.CreatedAt))
		if n, _ := rowsAffected(res, err); err == nil && n == 0 {
			return replayedPayout(ctx, tx, p, &out)
		} else if err != nil {
			return err
		}
		if err := postTransfers(ctx, tx, []*idlegrid.Transfer{t}); err != nil {
			return err
		}
		out, err = findPayout(ctx, tx, p.ID, "")
		return err
	})
	return out, err
}

// replayedPayout answers a payout request whose key was seen before.
func replayedPayout(ctx context.Context, tx *sql.Tx, p *idlegrid.Payout, out **idlegrid.Payout) error {
	stored, err := scanPayout(tx.QueryRowContext(ctx, `SELECT `+payoutColumns+` FROM payouts
		WHERE provider_id = $1 AND idempotency_key = $2`, p.ProviderID, p.IdempotencyKey))
	if err != nil {
		return err
	} else if stored.AmountMicros != p.AmountMicros {
		e := idlegrid.Errorf(idlegrid.ECONFLICT, "idempotency key %q was used before for a payout of %s (%s)",
			p.IdempotencyKey, stored.AmountMicros, stored.ID)
		e.Field = "idempotency_key" // the caller's to change: the CLI says how
		return e
	}
	*out = stored
	return nil
}

func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ResolvePayout settles or rejects a requested payout and posts t. A retry
// with the same resolution key returns the payout as it is; any other
// change to a resolved payout is ECONFLICT.
func (db *DB) ResolvePayout(ctx context.Context, r *idlegrid.PayoutResolution, t *idlegrid.Transfer) (*idlegrid.Payout, error) {
	switch {
	case r.To != idlegrid.PayoutSettled && r.To != idlegrid.PayoutRejected:
		return nil, idlegrid.Invalid("payout.state", "a payout is settled or rejected, not %q", r.To)
	case r.IdempotencyKey == "":
		return nil, idlegrid.Invalid("payout.resolution_key", "required")
	case r.At.IsZero():
		return nil, idlegrid.Invalid("payout.resolved_at", "required")
	case t == nil:
		return nil, idlegrid.Invalid("payout.transfer", "required")
	}
	var out *idlegrid.Payout
	err := db.update(ctx, func(tx *sql.Tx) error {
		p, err := findPayout(ctx, tx, r.PayoutID, db.dialect.forUpdate)
		if err != nil {
			return err
		}
		if p.State != idlegrid.PayoutRequested {
			if p.State == r.To && p.ResolutionKey == r.IdempotencyKey {
				out = p
				return nil
			}
			return idlegrid.Errorf(idlegrid.ECONFLICT, "payout %s is already %s", p.ID, p.State)
		}
		if err := checkPayoutTransfer(p, t); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE payouts SET state = $1, reason = $2, resolution_key = $3,
			resolved_by = $4, resolved_at = $5 WHERE id = $6`,
			string(r.To), r.Reason, r.IdempotencyKey, r.By, timeArg(r.At), p.ID); err != nil {
			return err
		}
		if err := postTransfers(ctx, tx, []*idlegrid.Transfer{t}); err != nil {
			return err
		}
		out, err = findPayout(ctx, tx, p.ID, "")
		return err
	})
	return out, err
}

// checkPayoutTransfer makes sure t moves exactly the payout's money out of
// its provider's in-flight account.
func checkPayoutTransfer(p *idlegrid.Payout, t *idlegrid.Transfer) error {
	for _, e := range t.Entries {
		if e.Account == idlegrid.ProviderPayout(p.ProviderID) && e.Amount == -p.AmountMicros {
			return nil
		}
	}
	return idlegrid.Invalid("payout.transfer", "must take %s out of %s", p.AmountMicros, idlegrid.ProviderPayout(p.ProviderID))
}

// FindPayout returns the payout with id.
func (db *DB) FindPayout(ctx context.Context, id string) (*idlegrid.Payout, error) {
	var p *idlegrid.Payout
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		p, err = findPayout(ctx, tx, id, "")
		return err
	})
	return p, err
}

// ListPayouts returns the payouts f selects, newest first.
func (db *DB) ListPayouts(ctx context.Context, f idlegrid.PayoutFilter) ([]*idlegrid.Payout, error) {
	var a args
	q := `SELECT ` + payoutColumns + ` FROM payouts WHERE 1 = 1`
	if f.ProviderID != "" {
		q += ` AND provider_id = ` + a.add(f.ProviderID)
	}
	if len(f.States) > 0 {
		q += ` AND state IN ` + in(&a, f.States)
	}
	if f.Before != "" { // the page after Before's; none if it is not a payout
		q += ` AND (created_at, id) < (SELECT created_at, id FROM payouts WHERE id = ` + a.add(f.Before) + `)`
	}
	if f.After != "" { // the same, oldest first
		q += ` AND (created_at, id) > (SELECT created_at, id FROM payouts WHERE id = ` + a.add(f.After) + `)`
	}
	order := ` ORDER BY created_at DESC, id DESC`
	if f.OldestFirst {
		order = ` ORDER BY created_at, id`
	}
	q += order + ` LIMIT ` + a.add(limitOf(f.Limit))
	var out []*idlegrid.Payout
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryAll(ctx, tx, scanPayout, q, a...)
		return err
	})
	return out, err
}
