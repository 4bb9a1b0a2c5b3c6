package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// TestOpen_schemaNewer: a database that a newer idlegrid migrated, with a
// migration this binary does not know, is refused, not run on tables the
// binary was not written for (an operator going back to the older binary
// after an upgrade).
func TestOpen_schemaNewer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		dsn  func(t *testing.T) (dsn, driver, raw string)
	}{
		{"sqlite", func(t *testing.T) (string, string, string) {
			path := filepath.Join(t.TempDir(), "idlegrid.db")
			return path, "sqlite", path
		}},
		{"postgres", func(t *testing.T) (string, string, string) {
			dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
			return dsn, "pgx", dsn
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, driver, rawDSN := tc.dsn(t)
			db, err := sqlstore.Open(ctx, dsn)
			mustOK(t, err)
			mustOK(t, db.Close())
			raw, err := sql.Open(driver, rawDSN)
			mustOK(t, err)
			defer raw.Close()
			var known int64
			mustOK(t, raw.QueryRowContext(ctx, `SELECT MAX(version_id) FROM goose_db_version`).Scan(&known))
			_, err = raw.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, known+1)
			mustOK(t, err)

			db, err = sqlstore.Open(ctx, dsn)
			if err == nil {
				db.Close()
			}
			if !errors.Is(err, sqlstore.ErrSchemaNewer) {
				t.Fatalf("Open of a database a newer idlegrid migrated: %v, want ErrSchemaNewer", err)
			}
			if want := "knows those up to "; !strings.Contains(err.Error(), want) {
				t.Errorf("Open: %v, want it to say %q which migration this binary knows", err, want)
			}
		})
	}
}

// TestOpen_noPrivilege: a PostgreSQL role that reaches the database but
// may not create the market's tables is told so, apart from a database
// that cannot be reached.
func TestOpen_noPrivilege(t *testing.T) {
	weak := pgtest.NewUnprivilegedDSN(t, pgtest.NewDSN(t)) // skips without IDLEGRID_TEST_POSTGRES
	db, err := sqlstore.Open(context.Background(), weak)
	if err == nil {
		db.Close()
	}
	if !errors.Is(err, sqlstore.ErrNoPrivilege) {
		t.Fatalf("Open as a role without privileges: %v, want ErrNoPrivilege", err)
	}
}
