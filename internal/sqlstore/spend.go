package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/idlegrid/idlegrid"
)

// What renters were charged is kept as it is charged, by account, API key
// and calendar month (UTC), in spend_months: a lease's charge when it ends
// (the month of its end), a metered inference request's when it is
// recorded (the month of the request). A row with key_id '' is the
// account's whole; the others are what each key's jobs and requests were
// charged. Beside charged_micros, refunded_micros is what upheld disputes
// gave back of those charges (refundSpent). Spend limits (MonthSpend) and
// balances (Balance.Spent) read a row or a few, however long the renter's
// history.

// spendMonth names one row of spend_months.
type spendMonth struct {
	account, key, month string
}

// monthKey is the spend_months month of t: "2006-01", in UTC.
func monthKey(t time.Time) string { return t.UTC().Format("2006-01") }

// spendSums are charges summed by row of spend_months.
type spendSums map[spendMonth]idlegrid.Micros

// add counts a charge of amount to account, and to key when not empty, in
// the month of at.
func (s spendSums) add(account, key string, at time.Time, amount idlegrid.Micros) {
	if amount == 0 {
		return
	}
	m := monthKey(at)
	s[spendMonth{account, "", m}] += amount
	if key != "" {
		s[spendMonth{account, key, m}] += amount
	}
}

// addRows adds each row q reads in tx: an account, a key, a time and an
// amount.
func (s spendSums) addRows(ctx context.Context, tx *sql.Tx, q string) error {
	return queryEach(ctx, tx, q, nil, func(rows *sql.Rows) error {
		var account, key string
		var at sql.NullInt64
		var amount int64
		if err := rows.Scan(&account, &key, &at, &amount); err != nil {
			return err
		}
		s.add(account, key, timeOf(at), idlegrid.Micros(amount))
		return nil
	})
}

// write adds the sums to spend_months in tx, in key order.
func (s spendSums) write(ctx context.Context, tx *sql.Tx) error {
	keys := s.sortedKeys()
	rows := make([][]any, len(keys))
	for i, k := range keys {
		rows[i] = []any{k.account, k.key, k.month, int64(s[k])}
	}
	return writeRows(ctx, tx, `INSERT INTO spend_months (account_id, key_id, month, charged_micros)`,
		`ON CONFLICT (account_id, key_id, month) DO UPDATE SET charged_micros = spend_months.charged_micros + excluded.charged_micros`,
		rows, nil)
}

// writeRefunds adds the sums to what spend_months says disputes refunded,
// in tx, in key order.
func (s spendSums) writeRefunds(ctx context.Context, tx *sql.Tx) error {
	keys := s.sortedKeys()
	rows := make([][]any, len(keys))
	for i, k := range keys {
		rows[i] = []any{k.account, k.key, k.month, 0, int64(s[k])}
	}
	return writeRows(ctx, tx, `INSERT INTO spend_months (account_id, key_id, month, charged_micros, refunded_micros)`,
		`ON CONFLICT (account_id, key_id, month) DO UPDATE SET refunded_micros = spend_months.refunded_micros + excluded.refunded_micros`,
		rows, nil)
}

func (s spendSums) sortedKeys() []spendMonth {
	return slices.SortedFunc(maps.Keys(s), func(a, b spendMonth) int {
		return cmp.Or(cmp.Compare(a.account, b.account), cmp.Compare(a.key, b.key), cmp.Compare(a.month, b.month))
	})
}

// addSpent counts, in the transaction that charges it, a charge of amount
// to account and key (when not empty) in the month of at.
func addSpent(ctx context.Context, tx *sql.Tx, account, key string, at time.Time, amount idlegrid.Micros) error {
	s := spendSums{}
	s.add(account, key, at, amount)
	return s.write(ctx, tx)
}

// refundSpent counts, in the transaction of the dispute that refunds it,
// amount given back to the renter of lease leaseID, against the spend of
// the month the lease was charged in (its end; at, the refund's time, for
// a lease not ended), so that a month's spend, and its limits, are its
// charges less what disputes refunded of them.
func refundSpent(ctx context.Context, tx *sql.Tx, leaseID string, amount idlegrid.Micros, at time.Time) error {
	if leaseID == "" || amount == 0 {
		return nil
	}
	var account, key string
	var ended sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT l.renter_id, j.submitted_by_key, l.ended_at FROM leases l JOIN jobs j ON j.id = l.job_id
		WHERE l.id = $1`, leaseID).Scan(&account, &key, &ended); err != nil {
		return fmt.Errorf("the refunded lease %s: %w", leaseID, err)
	}
	if ended.Valid {
		at = timeOf(ended)
	}
	s := spendSums{}
	s.add(account, key, at, amount)
	return s.writeRefunds(ctx, tx)
}

// spendMonthsMigration (20) makes spend_months and counts in it what was
// charged before: the leases that ended with a charge, in the month they
// ended, and the inference requests, in theirs. It is a Go migration
// because the month of a stored time takes a date function of each
// database's own.
var spendMonthsMigration = goose.NewGoMigration(20,
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE spend_months (
			account_id     TEXT NOT NULL,
			key_id         TEXT NOT NULL,
			month          TEXT NOT NULL,
			charged_micros BIGINT NOT NULL,
			PRIMARY KEY (account_id, key_id, month)
		)`); err != nil {
			return err
		}
		sums := spendSums{}
		for _, q := range []string{
			`SELECT l.renter_id, j.submitted_by_key, l.ended_at, l.charged_micros FROM leases l JOIN jobs j ON j.id = l.job_id
				WHERE l.charged_micros <> 0 AND l.ended_at IS NOT NULL`,
			`SELECT renter_id, key_id, created_at, charge_micros FROM inference_usage WHERE charge_micros <> 0`,
		} {
			if err := sums.addRows(ctx, tx, q); err != nil {
				return err
			}
		}
		return sums.write(ctx, tx)
	}},
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DROP TABLE spend_months`)
		return err
	}},
)

// spendRefundsMigration (43) adds spend_months.refunded_micros and counts
// in it what upheld disputes refunded before, each against the month its
// lease was charged in, as refundSpent does.
var spendRefundsMigration = goose.NewGoMigration(43,
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE spend_months ADD COLUMN refunded_micros BIGINT NOT NULL DEFAULT 0`); err != nil {
			return err
		}
		sums := spendSums{}
		if err := sums.addRows(ctx, tx, `SELECT l.renter_id, j.submitted_by_key, COALESCE(l.ended_at, d.resolved_at),
				d.refund_micros + d.fee_refund_micros
			FROM disputes d JOIN leases l ON l.id = d.lease_id JOIN jobs j ON j.id = l.job_id
			WHERE d.refund_micros + d.fee_refund_micros <> 0`); err != nil {
			return err
		}
		return sums.writeRefunds(ctx, tx)
	}},
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `ALTER TABLE spend_months DROP COLUMN refunded_micros`)
		return err
	}},
)
