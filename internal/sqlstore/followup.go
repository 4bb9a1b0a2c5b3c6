package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Follow-ups are an outbox (see idlegrid.FollowUp): a row written in the
// transaction whose commit calls for the work, removed when it is done.

// MaxFollowUpBatch is the most follow-ups DueFollowUps returns at once.
const MaxFollowUpBatch = 1000

// AddFollowUp stores f in a transaction of its own; see idlegrid.Store.
func (db *DB) AddFollowUp(ctx context.Context, f *idlegrid.FollowUp) error {
	if err := checkFollowUp(f); err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error { return insertFollowUp(ctx, tx, db.dialect, f) })
}

func checkFollowUp(f *idlegrid.FollowUp) error {
	switch {
	case f.ID == "" || f.Kind == "":
		return idlegrid.Invalid("follow_up.id", "id and kind are required")
	case f.DueAt.IsZero() || f.CreatedAt.IsZero():
		return idlegrid.Invalid("follow_up.due_at", "due_at and created_at are required")
	case f.Tries < 0:
		return idlegrid.Invalid("follow_up.tries", "must not be negative")
	}
	return nil
}

// insertFollowUp stores f (nil: none) in tx: ECONFLICT when its ID is
// pending.
func insertFollowUp(ctx context.Context, tx *sql.Tx, d *dialect, f *idlegrid.FollowUp) error {
	if f == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO follow_ups (id, kind, body, tries, due_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, f.ID, f.Kind, f.Body, f.Tries, timeArg(f.DueAt), timeArg(f.CreatedAt))
	if isCode(d.translate(err), idlegrid.ECONFLICT) {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "follow-up %q is pending already", f.ID)
	}
	return err
}

// DueFollowUps returns the follow-ups due at at, those due first first.
func (db *DB) DueFollowUps(ctx context.Context, at time.Time, limit int) ([]*idlegrid.FollowUp, error) {
	if limit < 1 || limit > MaxFollowUpBatch {
		return nil, idlegrid.Invalid("limit", "must be between 1 and %d, got %d", MaxFollowUpBatch, limit)
	}
	var out []*idlegrid.FollowUp
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT id, kind, body, tries, due_at, created_at FROM follow_ups
			WHERE due_at <= $1 ORDER BY due_at, id LIMIT $2`, timeArg(at), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			f := &idlegrid.FollowUp{}
			var due, created sql.NullInt64
			if err := rows.Scan(&f.ID, &f.Kind, &f.Body, &f.Tries, &due, &created); err != nil {
				return err
			}
			f.DueAt, f.CreatedAt = timeOf(due), timeOf(created)
			out = append(out, f)
		}
		return rows.Err()
	})
	return out, err
}

// DeferFollowUp counts a failed try of follow-up id and makes it due at due.
func (db *DB) DeferFollowUp(ctx context.Context, id string, due time.Time) error {
	if due.IsZero() {
		return idlegrid.Invalid("follow_up.due_at", "required")
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE follow_ups SET tries = tries + 1, due_at = $1 WHERE id = $2`, timeArg(due), id)
		return err
	})
}

// DoneFollowUp removes follow-up id, done.
func (db *DB) DoneFollowUp(ctx context.Context, id string) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM follow_ups WHERE id = $1`, id)
		return err
	})
}
