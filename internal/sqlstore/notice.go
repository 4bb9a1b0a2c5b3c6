package sqlstore

import (
	"context"
	"database/sql"

	"github.com/idlegrid/idlegrid"
)

// AddNotice stores n unless a notice with its key exists, and reports
// whether it did.
func (db *DB) AddNotice(ctx context.Context, n *idlegrid.Notice) (bool, error) {
	switch {
	case n.ID == "" || n.AccountID == "" || n.Key == "":
		return false, idlegrid.Invalid("notice", "id, account_id and key are required")
	case n.Message == "":
		return false, idlegrid.Invalid("notice.message", "required")
	case n.CreatedAt.IsZero():
		return false, idlegrid.Invalid("notice.created_at", "required")
	}
	var added bool
	err := db.update(ctx, func(tx *sql.Tx) error {
		if _, err := findAccount(ctx, tx, n.AccountID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO notices (id, account_id, kind, notice_key, lease_id, job_id,
			message, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (notice_key) DO NOTHING`,
			n.ID, n.AccountID, string(n.Kind), n.Key, n.LeaseID, n.JobID, n.Message, timeArg(n.CreatedAt))
		rows, err := rowsAffected(res, err)
		added = rows == 1
		return err
	})
	return added, err
}

// ListNotices returns the account's notices, newest first: after f.Before,
// which must be one of them, when it is set.
func (db *DB) ListNotices(ctx context.Context, f idlegrid.NoticeFilter) ([]*idlegrid.Notice, error) {
	a := args{f.AccountID}
	q := `SELECT id, account_id, kind, notice_key, lease_id, job_id, message, created_at
		FROM notices WHERE account_id = $1`
	if f.Before != "" {
		q += ` AND (created_at, id) < (SELECT created_at, id FROM notices WHERE id = ` + a.add(f.Before) + `)`
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ` + a.add(limitOf(f.Limit))
	var out []*idlegrid.Notice
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		if err := checkCursor(ctx, tx, "notices", `account_id = $1`, args{f.AccountID}, f.Before, "notice"); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, q, a...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n idlegrid.Notice
			var created sql.NullInt64
			if err := rows.Scan(&n.ID, &n.AccountID, &n.Kind, &n.Key, &n.LeaseID, &n.JobID, &n.Message, &created); err != nil {
				return err
			}
			n.CreatedAt = timeOf(created)
			out = append(out, &n)
		}
		return rows.Err()
	})
	return out, err
}
