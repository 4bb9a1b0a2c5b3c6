package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/pgtest"
)

// TestDB_viewOneSnapshot: every statement of a read-only transaction sees
// the database as it was at the first, on both stores, so that a method
// that reads a balance or a month's spend in parts never mixes a moment
// before a commit with one after it.
func TestDB_viewOneSnapshot(t *testing.T) {
	for name, dsn := range map[string]func(t *testing.T) string{
		"SQLite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "view.db") },
		"Postgres": func(t *testing.T) string { return pgtest.NewDSN(t) }, // skips without IDLEGRID_TEST_POSTGRES
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, err := Open(ctx, dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			count := func(tx *sql.Tx) (n int) {
				if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM accounts`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			err = db.view(ctx, func(tx *sql.Tx) error {
				before := count(tx)
				a := &idlegrid.Account{ID: "acct_new", Name: "new", Role: idlegrid.RoleRenter, CreatedAt: time.Now()}
				if err := db.CreateAccount(ctx, a); err != nil { // commits on a connection of its own
					t.Fatal(err)
				}
				if after := count(tx); after != before {
					t.Errorf("the transaction's second read counts %d accounts, its first %d: a commit between them showed", after, before)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
