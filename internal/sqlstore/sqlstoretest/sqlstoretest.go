// Package sqlstoretest gives tests a fresh SQLite store without running
// every migration again: the first call in a test binary migrates one
// database, and each test gets a copy of its file.
//
// A copy is the file the migrations wrote, byte for byte, so a store opened
// on it is the one sqlstore.Open would have made on an empty path (Open
// finds every migration applied and runs none). Opening a store from
// nothing keeps its own tests in package sqlstore (TestDB_SQLiteNew,
// TestOpen_*).
package sqlstoretest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// migrated is the file of a freshly migrated SQLite store, read once.
var migrated = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "idlegrid-sqlstoretest-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "idlegrid.db")
	db, err := sqlstore.Open(context.Background(), path)
	if err != nil {
		return nil, err
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	// Closing the last connection checkpoints the write-ahead log into the
	// file and deletes it; a log left over would hold part of the schema.
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("sqlstoretest: %s-wal still holds %d bytes after close", path, fi.Size())
	}
	return os.ReadFile(path)
})

// Path returns the path of a new SQLite database in tb's temporary
// directory, already migrated, for sqlstore.Open. The file has mode 0600,
// as sqlstore creates its own.
func Path(tb testing.TB) string {
	tb.Helper()
	b, err := migrated()
	if err != nil {
		tb.Fatalf("migrate a template store: %v", err)
	}
	path := filepath.Join(tb.TempDir(), "idlegrid.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}
