package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
)

// Multi-row statements: a statement costs a round trip on PostgreSQL and a
// trip through the driver and the VDBE on SQLite, whatever its rows, so the
// rows a change writes together go in few statements.

// insertRows runs "head VALUES (…), (…)" for rows, several rows a
// statement; head is "INSERT INTO t (a, b)".
func insertRows(ctx context.Context, tx *sql.Tx, head string, rows [][]any) error {
	return writeRows(ctx, tx, head, "", rows, nil)
}

// writeRows runs "head VALUES (…), (…) tail" for rows, rowsPerStatement
// rows a statement; scan, when not nil, reads the rows each statement
// returns (a tail with RETURNING).
func writeRows(ctx context.Context, tx *sql.Tx, head, tail string, rows [][]any, scan func(*sql.Rows) error) error {
	for len(rows) > 0 {
		n := rowsPerStatement(len(rows))
		q, args := valuesOf(head, tail, rows[:n])
		rows = rows[n:]
		if scan == nil {
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
			continue
		}
		if err := queryEach(ctx, tx, q, args, scan); err != nil {
			return err
		}
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

// queryEach runs q and reads every row it returns with scan.
func queryEach(ctx context.Context, tx *sql.Tx, q string, args []any, scan func(*sql.Rows) error) error {
	rs, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		if err := scan(rs); err != nil {
			return err
		}
	}
	return rs.Err()
}

// valuesOf builds one multi-row statement and its arguments, with $N
// placeholders.
func valuesOf(head, tail string, rows [][]any) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, len(rows)*len(rows[0]))
	b.WriteString(head)
	b.WriteString(" VALUES ")
	for i, row := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j := range row {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(len(args) + j + 1))
		}
		b.WriteByte(')')
		args = append(args, row...)
	}
	if tail != "" {
		b.WriteByte(' ')
		b.WriteString(tail)
	}
	return b.String(), args
}
