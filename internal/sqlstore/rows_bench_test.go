package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkMultiRowInsert inserts 64 rows of 18 columns (a usage row's
// width) in one transaction on SQLite, rows a statement, with the store's
// $N parameters, which the statement cache hands SQLite as anonymous "?"
// (anonymousParams), and as the baseline the same statements with
// numbered "?N" parameters, which SQLite names: the driver asks for each
// parameter's name before binding it, and SQLite finds a name by walking
// a list as long as the statement's parameters.
//
// Run: go test -run '^$' -bench MultiRowInsert ./internal/sqlstore
func BenchmarkMultiRowInsert(b *testing.B) {
	for _, params := range []string{"anonymous", "numbered"} {
		for _, per := range []int{8, 64} {
			b.Run(fmt.Sprintf("params=%s/rows=%d", params, per), func(b *testing.B) {
				benchInsert(b, params == "numbered", per)
			})
		}
	}
}

func benchInsert(b *testing.B, numbered bool, per int) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	cols := []string{"id"}
	for i := 1; i < 18; i++ {
		cols = append(cols, fmt.Sprintf("c%d", i))
	}
	if _, err := db.db.ExecContext(ctx, `CREATE TABLE bench (id TEXT PRIMARY KEY, `+strings.Join(cols[1:], " INTEGER, ")+` INTEGER)`); err != nil {
		b.Fatal(err)
	}
	head := `INSERT INTO bench (` + strings.Join(cols, ", ") + `)`
	seq := 0
	for b.Loop() {
		tx, err := db.db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for range 64 / per {
			rows := make([][]any, per)
			for i := range rows {
				seq++
				rows[i] = []any{fmt.Sprintf("row-%09d", seq), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}
			}
			q, args := valuesOf(head, "", rows)
			if numbered {
				q = strings.ReplaceAll(q, "$", "?")
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/64, "µs/row")
}
