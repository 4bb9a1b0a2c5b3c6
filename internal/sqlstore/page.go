package sqlstore

import (
	"context"
	"database/sql"
	"slices"

	"github.com/idlegrid/idlegrid"
)

// newestFirst ends q, a list of table's rows, with its order and page:
// newest first by the time column at, then by ID, so that rows of the
// same time keep one order between pages; only the rows listed after
// before when it is set; at most limit (0: DefaultLimit).
func newestFirst(q string, a *args, table, at, before string, limit int) string {
	if before != "" {
		q += ` AND (` + at + `, id) < (SELECT ` + at + `, id FROM ` + table + ` WHERE id = ` + a.add(before) + `)`
	}
	return q + ` ORDER BY ` + at + ` DESC, id DESC LIMIT ` + a.add(limitOf(limit))
}

// checkCursor refuses before, a page's cursor, unless it is one of
// table's rows that scope (a condition over a's arguments) keeps: the last
// row of a page of the same list. what is a row in words, for the
// message ("verification").
func checkCursor(ctx context.Context, tx *sql.Tx, table, scope string, a args, before, what string) error {
	if before == "" {
		return nil
	}
	c := slices.Clone(a)
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE id = `+c.add(before)+` AND `+scope,
		c...).Scan(&n); err != nil {
		return err
	} else if n == 0 {
		return idlegrid.Invalid("before", "%q is not one of the %ss listed; give the ID of the last %s of the page before", before, what, what)
	}
	return nil
}
