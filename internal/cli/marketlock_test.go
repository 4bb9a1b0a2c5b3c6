package cli

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/dirlock"
	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// TestServer_lostMarketLock: a server on PostgreSQL whose lock's session
// is ended, and whose lock another server takes before it can take it
// again, stops serving and says why.
func TestServer_lostMarketLock(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	ctx := context.Background()
	rs, err := startServer(ctx, serveConfig{listen: "127.0.0.1:0", dsn: dsn, meterJournal: filepath.Join(t.TempDir(), "journal"),
		logger: slog.New(slog.DiscardHandler), lockCheck: 50 * time.Millisecond})
	mustOK(t, err)
	served := make(chan error, 1)
	go func() { served <- rs.serve(ctx, slog.New(slog.DiscardHandler)) }()

	// Another server's lock, taken the moment the first server's session
	// ends: the first finds it taken at its next check.
	raw, err := sql.Open("pgx", dsn)
	mustOK(t, err)
	defer raw.Close()
	second, err := sqlstore.Open(ctx, dsn)
	mustOK(t, err)
	defer second.Close()
	var taken *sqlstore.MarketLock
	deadline := time.Now().Add(waitLimit)
	for taken == nil && time.Now().Before(deadline) {
		// The database's advisory locks are the market lock's alone.
		if _, err := raw.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
			t.Fatal(err)
		}
		if taken, err = second.LockMarket(ctx, time.Hour); errors.Is(err, sqlstore.ErrMarketLocked) {
			time.Sleep(time.Millisecond) // the first's session is still ending, or it took its lock again
			continue
		}
		mustOK(t, err)
	}
	if taken == nil {
		t.Fatal("the second server never got the lock: the first took it again each time")
	}
	defer taken.Close()
	select {
	case err := <-served:
		if err == nil || !strings.Contains(err.Error(), "lost the market lock") {
			t.Errorf("the first server stopped with %v, want it to say it lost the market lock", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the first server serves on without its lock")
	}
}

// TestServer_marketLockTakenAgain: a server on PostgreSQL whose lock's
// session ends (a dropped connection, a restarted proxy), and whose lock
// no other server takes meanwhile, takes it again on a new session and
// serves on.
func TestServer_marketLockTakenAgain(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs, err := startServer(ctx, serveConfig{listen: "127.0.0.1:0", dsn: dsn, meterJournal: filepath.Join(t.TempDir(), "journal"),
		logger: slog.New(slog.DiscardHandler), lockCheck: 20 * time.Millisecond,
		lockGrace: time.Minute}) // checked often, and never given up for a slow check on a busy machine
	mustOK(t, err)
	served := make(chan error, 1)
	go func() { served <- rs.serve(ctx, slog.New(slog.DiscardHandler)) }()

	raw, err := sql.Open("pgx", dsn)
	mustOK(t, err)
	defer raw.Close()
	// The database's advisory locks are the market lock's alone.
	holder := func() (pid int, err error) {
		err = raw.QueryRowContext(ctx, `SELECT pid FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid)
		return pid, err
	}
	first, err := holder()
	mustOK(t, err)
	_, err = raw.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, first)
	mustOK(t, err)
	eventually(t, "the market lock taken again on a new session", func() error {
		select {
		case err := <-served:
			t.Fatalf("the server stopped once its lock's session ended: %v", err)
		default:
		}
		pid, err := holder()
		if err == nil && pid == first {
			err = errors.New("its first session holds it still")
		}
		return err
	})
	cancel()
	mustOK(t, <-served)
}

// TestServer_lockedBeforeMigrating: a server refused the market lock (a
// second replica, a new version started while the old one runs) leaves
// the database as it was: it takes the lock before it creates or migrates
// the database.
func TestServer_lockedBeforeMigrating(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "idlegrid.db")
	running, err := dirlock.TakeFile(dsn + "-lock") // the server running the market
	mustOK(t, err)
	defer running.Release()
	_, err = startServer(context.Background(), serveConfig{listen: "127.0.0.1:0", dsn: dsn, meterJournal: filepath.Join(dir, "journal"),
		logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, sqlstore.ErrMarketLocked) {
		t.Fatalf("a server started while another holds the market lock: %v, want ErrMarketLocked", err)
	}
	if _, err := os.Stat(dsn); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused server made the database %s (%v): it opened and migrated it before it took the lock", dsn, err)
	}
}
