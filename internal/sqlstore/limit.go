package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// SetSpendLimit sets or replaces a limit. A key's limit needs a key of the
// account: ENOTFOUND otherwise.
func (db *DB) SetSpendLimit(ctx context.Context, l *idlegrid.SpendLimit) error {
	if err := l.Validate(); err != nil {
		return err
	} else if l.UpdatedAt.IsZero() {
		return idlegrid.Invalid("spend_limit.updated_at", "required")
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := findAccount(ctx, tx, l.AccountID); err != nil {
			return err
		}
		if l.Scope == idlegrid.SpendKey {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE id = $1 AND account_id = $2`,
				l.KeyID, l.AccountID).Scan(&n); err != nil {
				return err
			} else if n == 0 {
				return notFound("API key", l.KeyID)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO spend_limits (scope, account_id, key_id, limit_micros, set_by, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (scope, account_id, key_id)
			DO UPDATE SET limit_micros = excluded.limit_micros, set_by = excluded.set_by, updated_at = excluded.updated_at`,
			string(l.Scope), l.AccountID, l.KeyID, int64(l.LimitMicros), l.SetBy, timeArg(l.UpdatedAt))
		return err
	})
}

// RemoveSpendLimit lifts a limit; lifting one that is not set is a no-op.
func (db *DB) RemoveSpendLimit(ctx context.Context, scope idlegrid.SpendScope, accountID, keyID string) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM spend_limits WHERE scope = $1 AND account_id = $2 AND key_id = $3`,
			string(scope), accountID, keyID)
		return err
	})
}

const spendLimitColumns = `scope, account_id, key_id, limit_micros, set_by, updated_at`

func scanSpendLimit(s scanner) (*idlegrid.SpendLimit, error) {
	var l idlegrid.SpendLimit
	var updated sql.NullInt64
	if err := s.Scan(&l.Scope, &l.AccountID, &l.KeyID, &l.LimitMicros, &l.SetBy, &updated); err != nil {
		return nil, err
	}
	l.UpdatedAt = timeOf(updated)
	return &l, nil
}

// ListSpendLimits returns the account's own limit first, then its keys'.
func (db *DB) ListSpendLimits(ctx context.Context, accountID string) ([]*idlegrid.SpendLimit, error) {
	var out []*idlegrid.SpendLimit
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryAll(ctx, tx, scanSpendLimit, `SELECT `+spendLimitColumns+` FROM spend_limits WHERE account_id = $1
			ORDER BY scope, key_id`, accountID)
		return err
	})
	return out, err
}

// MonthSpend returns what the scope f names used of its month.
func (db *DB) MonthSpend(ctx context.Context, f idlegrid.SpendFilter) (*idlegrid.Spend, error) {
	if f.AccountID == "" {
		return nil, idlegrid.Invalid("spend.account_id", "required")
	} else if from, to := idlegrid.MonthOf(f.From); !f.From.Equal(from) || !f.To.Equal(to) {
		return nil, idlegrid.Invalid("spend.month", "must be one calendar month (UTC), from its first instant to the next month's; got [%s, %s)",
			f.From.Format(time.RFC3339), f.To.Format(time.RFC3339))
	}
	var s *idlegrid.Spend
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		s, err = monthSpend(ctx, tx, f)
		return err
	})
	return s, err
}

// monthSpend is what the scope was charged in the month f starts (its
// leases that ended in it and its inference requests), less what disputes
// refunded of those charges, and the holds of its live leases, read in
// one statement: in a write transaction on PostgreSQL each statement sees
// what had committed when it began, and a lease that ended between two
// would be counted in neither.
func monthSpend(ctx context.Context, tx *sql.Tx, f idlegrid.SpendFilter) (*idlegrid.Spend, error) {
	var a args
	account := a.add(f.AccountID)
	row := ` FROM spend_months WHERE account_id = ` + account + ` AND key_id = ` + a.add(f.KeyID) + ` AND month = ` + a.add(monthKey(f.From))
	charged, refunded := `SELECT charged_micros - refunded_micros`+row, `SELECT refunded_micros`+row
	held := `SELECT SUM(l.hold_micros) FROM leases l WHERE l.renter_id = ` + account
	if f.KeyID != "" {
		held = `SELECT SUM(l.hold_micros) FROM leases l JOIN jobs j ON j.id = l.job_id
			WHERE l.renter_id = ` + account + ` AND j.submitted_by_key = $2`
	}
	held += ` AND l.state IN ` + in(&a, liveStates)
	var s idlegrid.Spend
	err := tx.QueryRowContext(ctx, `SELECT CAST(COALESCE((`+charged+`), 0) AS BIGINT), CAST(COALESCE((`+refunded+`), 0) AS BIGINT),
		CAST(COALESCE((`+held+`), 0) AS BIGINT)`, a...).Scan(&s.ChargedMicros, &s.RefundedMicros, &s.HeldMicros)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

var liveStates = []idlegrid.LeaseState{idlegrid.LeaseAssigned, idlegrid.LeaseRunning}

// spendLimit reads the limit of key, locked, from the batch's reads or the
// store: sql.ErrNoRows when there is none.
func (r *laterRows) spendLimit(ctx context.Context, tx *sql.Tx, d *dialect, key spendKey) (*idlegrid.SpendLimit, error) {
	if r.batched {
		if l := r.read.limits[key]; l != nil {
			return l, nil
		}
		return nil, sql.ErrNoRows
	}
	return scanSpendLimit(tx.QueryRowContext(ctx, `SELECT `+spendLimitColumns+` FROM spend_limits
		WHERE scope = $1 AND account_id = $2 AND key_id = $3`+d.forUpdate, string(key.scope), key.accountID, key.keyID))
}

// checkSpendLimits refuses, with EPAYMENT, holds that would take the job's
// account or the key that submitted it over its limit for the month of at.
// It locks the limits it reads, so that two placements cannot both fit
// under the same limit.
func checkSpendLimits(ctx context.Context, tx *sql.Tx, d *dialect, j *idlegrid.Job, hold idlegrid.Micros, at time.Time, pending *laterRows) error {
	from, to := idlegrid.MonthOf(at)
	scopes := []struct {
		scope idlegrid.SpendScope
		keyID string
	}{{idlegrid.SpendAccount, ""}}
	if j.SubmittedByKey != "" {
		scopes = append(scopes, struct {
			scope idlegrid.SpendScope
			keyID string
		}{idlegrid.SpendKey, j.SubmittedByKey})
	}
	for _, sc := range scopes {
		l, err := pending.spendLimit(ctx, tx, d, spendKey{sc.scope, j.RenterID, sc.keyID})
		if errors.Is(err, sql.ErrNoRows) {
			continue
		} else if err != nil {
			return err
		}
		if err := pending.insertBatched(ctx, tx); err != nil { // the holds placed before this one in the batch count
			return err
		}
		s, err := monthSpend(ctx, tx, idlegrid.SpendFilter{AccountID: j.RenterID, KeyID: sc.keyID, From: from, To: to})
		if err != nil {
			return err
		}
		if s.Used()+hold > l.LimitMicros {
			return overLimit(l, s, hold, from)
		}
	}
	return nil
}

// overLimit is the EPAYMENT error of a placement that a limit refuses.
func overLimit(l *idlegrid.SpendLimit, s *idlegrid.Spend, hold idlegrid.Micros, month time.Time) error {
	what := "account " + l.AccountID
	if l.Scope == idlegrid.SpendKey {
		what = "API key " + l.KeyID
	}
	state := "reached"
	if s.Used() < l.LimitMicros { // the placement's hold, not the month's use, passes it
		state = fmt.Sprintf("would be exceeded (%s left)", l.LimitMicros-s.Used())
	}
	return idlegrid.Errorf(idlegrid.EPAYMENT,
		"spend limit of %s %s: %s a month, %s used in %s (%s charged, %s held), and this placement would hold %s more",
		what, state, l.LimitMicros, s.Used(), month.Format("2006-01"), s.ChargedMicros, s.HeldMicros, hold)
}
