package cli

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// TestServerCommand_schemaNewer: a server started on a database a newer
// idlegrid migrated (an operator going back to the older binary) exits,
// saying so and how to go back, rather than run the market on tables it
// was not written for.
func TestServerCommand_schemaNewer(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "idlegrid.db")
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dsn)
	mustOK(t, err)
	mustOK(t, db.Close())
	raw, err := sql.Open("sqlite", dsn)
	mustOK(t, err)
	defer raw.Close()
	_, err = raw.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied)
		SELECT MAX(version_id) + 1, true FROM goose_db_version`)
	mustOK(t, err)

	r := runUntil(t, waitLimit, nil, "server", "--listen", "127.0.0.1:0", "--db", dsn, "--meter-journal", filepath.Join(dir, "journal"))
	if r.code != 1 || !strings.Contains(r.err, "the database was migrated by a newer idlegrid") ||
		!strings.Contains(r.err, "restore the backup taken before the upgrade") || strings.Contains(r.err, "check --db") {
		t.Fatalf("a server on a database a newer idlegrid migrated: %s\nwant exit 1, saying so and how to go back", r)
	}
}

// TestServerCommand_roleWithoutPrivileges: a PostgreSQL role that reaches
// the database but may not create its tables is told to own them, not to
// check that the URL is reachable.
func TestServerCommand_roleWithoutPrivileges(t *testing.T) {
	weak := pgtest.NewUnprivilegedDSN(t, pgtest.NewDSN(t)) // skips without IDLEGRID_TEST_POSTGRES

	dir := t.TempDir()
	r := runUntil(t, waitLimit, nil, "server", "--listen", "127.0.0.1:0", "--db", weak,
		"--audit-key", filepath.Join(dir, "audit.key"), "--meter-journal", filepath.Join(dir, "journal"))
	if r.code != 1 || !strings.Contains(r.err, "may not create or change the market's tables") ||
		!strings.Contains(r.err, "needs to own it and its tables") || strings.Contains(r.err, "reachable postgres:// URL") {
		t.Fatalf("a server whose database role has no privileges: %s\nwant exit 1, saying the role must own the database", r)
	}
}

// TestServerCommand_postgresNotAURL: a --db meant for PostgreSQL but not
// written as a postgres:// URL is refused as a mistake in --db, without
// repeating it (it may hold a password), rather than taken for the name of
// a new SQLite file that the server would run an empty market in.
func TestServerCommand_postgresNotAURL(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // where a SQLite file of that name would be made
	for _, dsn := range []string{
		"host=db.internal port=5432 user=idlegrid password=s3cret dbname=idlegrid sslmode=verify-full",
		"dbname=idlegrid",
		"postgres:/idlegrid@db.internal/idlegrid",
	} {
		r := runUntil(t, 10*time.Second, nil, "server", "--listen", "127.0.0.1:0", "--db", dsn, "--meter-journal", filepath.Join(dir, "journal"))
		if r.code != 2 || !strings.Contains(r.err, "--db: ") || !strings.Contains(r.err, "postgres://USER@HOST") || strings.Contains(r.err, "s3cret") {
			t.Errorf("server --db %q: %s\nwant exit 2 naming --db and the URL's form, without the password", dsn, r)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused --db values left %v in the working directory", entries)
	}
}
