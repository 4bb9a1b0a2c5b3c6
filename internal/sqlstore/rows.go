package sqlstore

import (
	"context"
	"database/sql"
	"strings"
)

// Multi-row statements: a statement costs a round trip on PostgreSQL and a
// trip through the driver and the VDBE on SQLite, whatever its rows, so the
// rows a change writes together go in few statements.

// insertAll inserts rows with insert ("INSERT INTO t (a, b) VALUES "),
// several rows a statement.
func insertAll(ctx context.Context, tx *sql.Tx, insert string, rows [][]any) error {
	for len(rows) > 0 {
		n := rowsPerStatement(len(rows))
		var a args
		groups := make([]string, n)
		for i, row := range rows[:n] {
			groups[i] = valuesGroup(&a, row)
		}
		if _, err := tx.ExecContext(ctx, insert+strings.Join(groups, ", "), a...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// rowsPerStatement is how many of n rows the next multi-row statement
// takes: all of a few, else 64, 16 or 8, so that the statement cache
// holds few texts.
func rowsPerStatement(n int) int {
	if n <= 8 {
		return n
	}
	for _, size := range []int{64, 16} {
		if n >= size {
			return size
		}
	}
	return 8
}

// valuesGroup adds row's values to a and returns their "($1, $2, …)".
func valuesGroup(a *args, row []any) string {
	ps := make([]string, len(row))
	for j, v := range row {
		ps[j] = a.add(v)
	}
	return "(" + strings.Join(ps, ", ") + ")"
}
