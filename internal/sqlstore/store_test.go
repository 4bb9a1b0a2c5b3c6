package sqlstore_test

import (
	"path/filepath"
	"testing"

	"github.com/idlegrid/idlegrid/internal/pgtest"
)

func TestDB_SQLite(t *testing.T) {
	runStoreTests(t, func(t *testing.T) string {
		return filepath.Join(t.TempDir(), "sub", "idlegrid.db")
	})
}

// TestDB_Postgres runs when IDLEGRID_TEST_POSTGRES names a server; each test
// gets a database of its own.
func TestDB_Postgres(t *testing.T) {
	pgtest.NewDSN(t) // skips, saying how to enable it, when unset
	runStoreTests(t, func(t *testing.T) string { return pgtest.NewDSN(t) })
}
