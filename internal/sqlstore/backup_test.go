package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// TestBackup copies a market while renters' money keeps moving in it: the
// copy opens as a store, holds a moment of the ledger that sums to zero,
// and reports what it holds.
func TestBackup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dsn := filepath.Join(dir, "idlegrid.db")
	db := mustOpen(t, dsn)
	renters := make([]*idlegrid.Account, 4)
	for i := range renters {
		renters[i] = mustAccount(t, db, idlegrid.RoleRenter)
		mustTopUp(t, db, renters[i].ID, idlegrid.MicrosPerUnit)
	}
	_, err := db.ClaimAuditSigner(ctx, idlegrid.AuditSigner{PublicKey: "the-log-key", Since: t0})
	mustOK(t, err)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range renters { // writers while the backup runs
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					if _, err := db.PostTransfer(ctx, topUp(r.ID, 1)); err != nil {
						t.Errorf("a top-up during the backup: %v", err)
						return
					}
				}
			}
		})
	}
	to := filepath.Join(dir, "backups", "idlegrid-1.db")
	mustOK(t, os.MkdirAll(filepath.Dir(to), 0o700))
	r, err := sqlstore.Backup(ctx, dsn, to)
	close(stop)
	wg.Wait()
	mustOK(t, err)

	if r.Path != to || r.Accounts != int64(len(renters)) || r.Transfers < int64(len(renters)) || r.AuditEntries < r.Transfers ||
		r.SchemaVersion < 23 || r.AuditSigner != "the-log-key" || r.Bytes == 0 {
		t.Errorf("report %+v: want the four renters, their top-ups, each logged, the signer and schema 23 or later", r)
	}
	if fi, err := os.Stat(to); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup's mode: %v (%v), want 0600: it holds key hashes and the ledger", fi.Mode(), err)
	}
	copied := mustOpen(t, to)
	for _, rr := range renters {
		if b := mustBalance(t, copied, rr.ID); b.Available < idlegrid.MicrosPerUnit {
			t.Errorf("in the copy %s has %+v, want at least its first top-up", rr.ID, b)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "backups", ".*")); len(left) != 0 {
		t.Errorf("temporary files left beside the backup: %v", left)
	}

	_, err = sqlstore.Backup(ctx, dsn, to)
	if !errors.Is(err, sqlstore.ErrBackupExists) {
		t.Errorf("a backup onto an existing file: %v, want ErrBackupExists", err)
	}
	_, err = sqlstore.Backup(ctx, "postgres://localhost/idlegrid", filepath.Join(dir, "pg.db"))
	wantField(t, err, "db")
}

// TestBackup_checksTheCopy: a database whose balances are not the sums of
// their entries (the balance, what came in, what penalties refunded) is
// not backed up as if it were sound, and leaves no file behind.
func TestBackup_checksTheCopy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dsn := filepath.Join(dir, "idlegrid.db")
	db := mustOpen(t, dsn)
	r := mustAccount(t, db, idlegrid.RoleRenter)
	mustTopUp(t, db, r.ID, idlegrid.MicrosPerUnit)
	raw, err := sql.Open("sqlite", dsn)
	mustOK(t, err)
	defer raw.Close()
	for _, wrong := range []string{"balance = balance + 1", "credited = credited + 1", "refunded = refunded + 1"} {
		_, err = raw.Exec(`UPDATE balances SET ` + wrong + ` WHERE account = (SELECT MIN(account) FROM balances)`)
		mustOK(t, err)
		to := filepath.Join(dir, "backup.db")
		if _, err := sqlstore.Backup(ctx, dsn, to); err == nil || !strings.Contains(err.Error(), "is not the sum of its entries") {
			t.Fatalf("a backup after %s: %v, want refused", wrong, err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*backup.db*")); len(left) != 0 {
			t.Errorf("a refused backup left %v", left)
		}
		_, err = raw.Exec(`UPDATE balances SET ` + strings.Replace(wrong, "+", "-", 1) + ` WHERE account = (SELECT MIN(account) FROM balances)`)
		mustOK(t, err)
	}
	if _, err := sqlstore.Backup(ctx, dsn, filepath.Join(dir, "backup.db")); err != nil {
		t.Errorf("a backup once the rows are right again: %v", err)
	}
}
