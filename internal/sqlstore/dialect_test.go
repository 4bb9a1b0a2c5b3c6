package sqlstore

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestOpen_SQLitePragmas(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "10000"} {
		var got string
		if err := db.db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		} else if got != want {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}
}

// TestOpen_SQLiteKeepsConnections: connections used at once are kept for
// the next burst, not closed and opened again (each new SQLite connection
// parses the whole schema).
func TestOpen_SQLiteKeepsConnections(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	burst := func() {
		t.Helper()
		var conns []*sql.Conn
		for range sqliteIdleConns {
			c, err := db.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
	}
	burst()
	burst()
	if st := db.db.Stats(); st.OpenConnections != sqliteIdleConns || st.MaxIdleClosed != 0 {
		t.Errorf("after two bursts of %d: %d open, %d closed as surplus idle; want all kept, none closed",
			sqliteIdleConns, st.OpenConnections, st.MaxIdleClosed)
	}
}

// TestOpen_SQLitePrivate: a new database and its -wal and -shm files are
// for the server's user alone; an existing file keeps its mode.
func TestOpen_SQLitePrivate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_1", Name: "a", Role: idlegrid.RoleAdmin, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v (%v), want mode 0600", filepath.Base(f), fi.Mode().Perm(), err)
		}
	}

	shared := filepath.Join(dir, "shared.db")
	if err := os.WriteFile(shared, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	db2, err := Open(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if fi, err := os.Stat(shared); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("an existing database's mode became %v (%v), want it kept, 0640", fi.Mode().Perm(), err)
	}
}

func TestDialectFor(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u@h/db":    "postgres",
		"postgresql://u@h/db":  "postgres",
		"/var/lib/idlegrid.db": "sqlite",
		"idlegrid.db?_x=1":     "sqlite",
		"file:idlegrid.db":     "sqlite",
	} {
		if got := dialectFor(dsn).name; got != want {
			t.Errorf("dialectFor(%q) = %s, want %s", dsn, got, want)
		}
	}
}

func TestTime_RoundTrip(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC),
		time.Date(1999, 1, 1, 0, 0, 0, 1000, time.FixedZone("x", 3600)),
	} {
		v := timeArg(tm).(int64)
		if got := timeOf(sql.NullInt64{Int64: v, Valid: true}); !got.Equal(tm) || got.Location() != time.UTC {
			t.Errorf("round trip of %v = %v", tm, got)
		}
	}
	if timeArg(time.Time{}) != nil || timePtrArg(nil) != nil || timePtrOf(sql.NullInt64{}) != nil {
		t.Error("zero and nil times must be NULL")
	}
}

func TestTranslate(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.db.ExecContext(ctx, `INSERT INTO balances (account, balance) VALUES ('a', 1), ('a', 2)`)
	if got := idlegrid.ErrorCode(db.dialect.translate(err)); got != idlegrid.ECONFLICT {
		t.Errorf("unique violation: %s (%v), want conflict", got, err)
	}
	_, err = db.db.ExecContext(ctx, `INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at)
		VALUES ('k', 'nobody', '', '', 'h', 0)`)
	if got := idlegrid.ErrorCode(db.dialect.translate(err)); got != idlegrid.ENOTFOUND {
		t.Errorf("foreign key violation: %s (%v), want not_found", got, err)
	}
}

func TestOpen_SQLiteMemory(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := &idlegrid.Account{ID: "acct_m", Name: "M", Role: idlegrid.RoleAdmin, CreatedAt: time.Unix(1, 0).UTC()}
	if err := db.CreateAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FindAccount(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
}
