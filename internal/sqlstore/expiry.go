package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Expiry: what the store keeps only for a while. How long is the server's
// policy (internal/server/expiry.go); the store forgets what it is told to,
// in batches of at most MaxExpiryBatch rows, each batch found by a read and
// changed by a short write of its own, so that a sweep never holds the
// write lock for long, nor takes it when there is nothing to forget.
//
// What never expires is as deliberate: the idempotency key of a transfer
// (a top-up, a bond, a hold, a settlement, a payout's posting) or of a
// payout is a column of the ledger row it made, kept as long as the ledger,
// and the ledger's exactly-once postings rest on it. Nothing here reads or
// writes transfers, ledger entries or payouts.

// MaxExpiryBatch is the most rows one call of a sweep changes.
const MaxExpiryBatch = 1000

// endedJobStates are the job states whose submission's key may expire.
const endedJobStates = `('succeeded', 'failed', 'cancelled')`

// ForgetJobIdempotencyKey frees the renter's idempotency key when the job
// submitted with it ended before before: the job no longer shows the key,
// and a new submission may use it. A key whose job is live, or ended
// since, is kept, as is a key that names no job; neither is an error.
func (db *DB) ForgetJobIdempotencyKey(ctx context.Context, renterID, key string, before time.Time) error {
	if key == "" {
		return idlegrid.Invalid("job.idempotency_key", "required")
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE jobs SET idempotency_key = ''
			WHERE renter_id = $1 AND idempotency_key = $2 AND ended_at < $3 AND state IN `+endedJobStates,
			renterID, key, timeArg(before))
		return err
	})
}

// ForgetJobIdempotencyKeys frees, as ForgetJobIdempotencyKey does, the keys
// of at most limit jobs that ended before before, those that ended first
// first, and returns how many it freed: fewer than limit when no more are
// due.
func (db *DB) ForgetJobIdempotencyKeys(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkExpiryBatch(limit); err != nil {
		return 0, err
	}
	ids, err := db.dueIDs(ctx, `SELECT id FROM jobs
		WHERE idempotency_key <> '' AND ended_at < $1 AND state IN `+endedJobStates+`
		ORDER BY ended_at, id LIMIT $2`, timeArg(before), limit)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	var freed int64
	err = db.update(ctx, func(tx *sql.Tx) error {
		var a args
		q := `UPDATE jobs SET idempotency_key = '' WHERE id IN ` + in(&a, ids) + ` AND idempotency_key <> ''
			AND ended_at < ` + a.add(timeArg(before)) + ` AND state IN ` + endedJobStates
		res, err := tx.ExecContext(ctx, q, a...)
		if err != nil {
			return err
		}
		freed, err = res.RowsAffected()
		return err
	})
	return int(freed), err
}

// dueIDs returns the IDs the query q selects, in a read of their own: the
// rows a sweep is due to change, which it then changes in a short write.
func (db *DB) dueIDs(ctx context.Context, q string, a ...any) ([]string, error) {
	var ids []string
	err := db.view(ctx, func(tx *sql.Tx) error {
		ids = ids[:0] // a retried transaction reads again
		return queryEach(ctx, tx, q, a, func(rs *sql.Rows) error {
			var id string
			err := rs.Scan(&id)
			ids = append(ids, id)
			return err
		})
	})
	return ids, err
}

func checkExpiryBatch(limit int) error {
	if limit < 1 || limit > MaxExpiryBatch {
		return idlegrid.Invalid("limit", "must be between 1 and %d, got %d", MaxExpiryBatch, limit)
	}
	return nil
}
