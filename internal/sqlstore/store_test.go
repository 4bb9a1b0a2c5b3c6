package sqlstore_test

import (
	"path/filepath"
	"testing"

	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

// TestDB_SQLite runs the contract on SQLite, each test on a copy of one
// migrated database; TestDB_SQLiteNew opens one from nothing.
func TestDB_SQLite(t *testing.T) {
	runStoreTests(t, func(t *testing.T) string { return sqlstoretest.Path(t) })
}

// TestDB_SQLiteNew: a store opened where no file or directory is yet is
// created and migrated, keeps its data, and migrates nothing twice.
func TestDB_SQLiteNew(t *testing.T) {
	testReopen(t, filepath.Join(t.TempDir(), "sub", "idlegrid.db"))
}

// TestDB_Postgres runs when IDLEGRID_TEST_POSTGRES names a server; each test
// gets a database of its own, a copy of one migrated database, and
// Reopen_Empty one that starts empty.
func TestDB_Postgres(t *testing.T) {
	runStoreTests(t, postgresCopies(t)) // skips, saying how to enable it, when unset
	t.Run("Reopen_Empty", func(t *testing.T) { testReopen(t, pgtest.NewDSN(t)) })
}
