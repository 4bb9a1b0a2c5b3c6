package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// A SQLite market is one file (and its write-ahead log), so a backup is a
// copy of it taken at one moment: Backup runs VACUUM INTO on a read-only
// connection, which copies the database as one read transaction sees it
// while the server goes on writing, into a file beside the target. It then
// checks the copy as a restore would need it (SQLite's integrity check,
// every foreign key, a ledger whose entries and balances sum to zero) and
// only then renames it to the target, so a failed or interrupted backup
// leaves no file that looks like one. PostgreSQL has its own tools
// (pg_dump); Backup refuses its URLs.

// BackupReport says what a backup holds.
type BackupReport struct {
	Path          string `json:"path"`
	Bytes         int64  `json:"bytes"`
	SchemaVersion int64  `json:"schema_version"` // the last migration applied
	Accounts      int64  `json:"accounts"`
	Nodes         int64  `json:"nodes"`
	Jobs          int64  `json:"jobs"`
	Leases        int64  `json:"leases"`
	Transfers     int64  `json:"transfers"`
	AuditEntries  int64  `json:"audit_entries"`
	AuditSigner   string `json:"audit_signer,omitempty"` // the key the log is signed with; it is not in the backup
}

// ErrBackupExists is Backup's answer when its target exists: a backup
// never replaces a file.
var ErrBackupExists = errors.New("the backup file already exists")

// Backup copies the SQLite database at dsn, which a server may be using,
// to the new file to, and checks the copy.
func Backup(ctx context.Context, dsn, to string) (*BackupReport, error) {
	if dialectFor(dsn) != sqliteDialect {
		return nil, idlegrid.Invalid("db", "is a PostgreSQL URL: back it up with pg_dump")
	}
	from, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if from == "" || from == ":memory:" {
		return nil, idlegrid.Invalid("db", "needs the SQLite file to back up")
	}
	if _, err := os.Stat(from); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Lstat(to); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrBackupExists, to)
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".*")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	tmp.Close() // empty, as VACUUM INTO needs, and mode 0600: the copy holds key hashes and the ledger
	defer os.Remove(tmp.Name())
	if err := vacuumInto(ctx, from, tmp.Name()); err != nil {
		return nil, err
	}
	r, err := checkBackup(ctx, tmp.Name())
	if err != nil {
		return nil, err
	}
	if err := syncFile(tmp.Name()); err != nil {
		return nil, err
	}
	if err := publish(tmp.Name(), to); err != nil {
		return nil, err
	}
	r.Path = to
	return r, syncFile(filepath.Dir(to))
}

// publish gives the checked copy its name: a hard link, which unlike a
// rename never replaces a file made meanwhile, or a rename where the file
// system has no hard links (some network shares).
func publish(tmp, to string) error {
	err := os.Link(tmp, to)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%w: %s", ErrBackupExists, to)
	}
	if _, serr := os.Lstat(to); serr == nil {
		return fmt.Errorf("%w: %s", ErrBackupExists, to)
	}
	if rerr := os.Rename(tmp, to); rerr != nil {
		return fmt.Errorf("backup: %w", errors.Join(err, rerr))
	}
	return nil
}

// vacuumInto copies the database at from into the new file to.
func vacuumInto(ctx context.Context, from, to string) error {
	src, err := sql.Open("sqlite", "file:"+from+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer src.Close()
	if _, err := src.ExecContext(ctx, `VACUUM INTO ?`, to); err != nil {
		return fmt.Errorf("backup: copy %s: %w", from, err)
	}
	return nil
}

// checkBackup opens the copy at path and checks that a server could start
// on it and find the market as it was.
func checkBackup(ctx context.Context, path string) (*BackupReport, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		return nil, fmt.Errorf("backup: the copy fails SQLite's integrity check: %s %v", ok, err)
	}
	var table, parent string
	switch err := db.QueryRowContext(ctx, `SELECT "table", parent FROM pragma_foreign_key_check`).Scan(&table, &parent); {
	case err == nil:
		return nil, fmt.Errorf("backup: the copy has rows of %s that refer to %s rows it lacks", table, parent)
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("backup: check the copy's foreign keys: %w", err)
	}
	if err := checkLedgerSums(ctx, db); err != nil {
		return nil, err
	}
	r := &BackupReport{}
	if err := countBackup(ctx, db, r); err != nil {
		return nil, fmt.Errorf("backup: read the copy: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	r.Bytes = fi.Size()
	return r, nil
}

// checkLedgerSums checks the double entry: every posting's entries sum
// to zero, each balance (and what came in to it, and what penalties
// refunded of it) is the sum of its account's entries, and the balances
// sum to zero.
func checkLedgerSums(ctx context.Context, db *sql.DB) error {
	var transfer string
	switch err := db.QueryRowContext(ctx, `SELECT transfer_id FROM ledger_entries
		GROUP BY transfer_id HAVING SUM(amount) <> 0 LIMIT 1`).Scan(&transfer); {
	case err == nil:
		return fmt.Errorf("backup: the copy's transfer %s does not sum to zero", transfer)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("backup: check the copy's ledger: %w", err)
	}
	var account string
	switch err := db.QueryRowContext(ctx, `SELECT e.account FROM (SELECT e.account, SUM(e.amount) AS total,
			SUM(CASE WHEN e.amount > 0 THEN e.amount ELSE 0 END) AS credited,
			SUM(CASE WHEN e.amount < 0 AND r.kind = 'penalty' THEN -e.amount ELSE 0 END) AS refunded
			FROM ledger_entries e JOIN transfers r ON r.id = e.transfer_id GROUP BY e.account) e
		LEFT JOIN balances b ON b.account = e.account
		WHERE COALESCE(b.balance, 0) <> e.total OR COALESCE(b.credited, 0) <> e.credited OR COALESCE(b.refunded, 0) <> e.refunded
		UNION ALL
		SELECT b.account FROM balances b WHERE (b.balance <> 0 OR b.credited <> 0 OR b.refunded <> 0)
			AND NOT EXISTS (SELECT 1 FROM ledger_entries e WHERE e.account = b.account)
		LIMIT 1`).Scan(&account); {
	case err == nil:
		return fmt.Errorf("backup: the copy's balance of %s, or what came in to it or penalties refunded of it, is not the sum of its entries", account)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("backup: check the copy's balances: %w", err)
	}
	var sum int64
	if err := db.QueryRowContext(ctx, ledgerSumQuery).Scan(&sum); err != nil {
		return fmt.Errorf("backup: check the copy's balances: %w", err)
	} else if sum != 0 {
		return fmt.Errorf("backup: the copy's balances sum to %d, not zero", sum)
	}
	return nil
}

func countBackup(ctx context.Context, db *sql.DB, r *BackupReport) error {
	for _, q := range []struct {
		to    *int64
		query string
	}{
		{&r.SchemaVersion, `SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version WHERE is_applied`},
		{&r.Accounts, `SELECT COUNT(*) FROM accounts`},
		{&r.Nodes, `SELECT COUNT(*) FROM nodes`},
		{&r.Jobs, `SELECT COUNT(*) FROM jobs`},
		{&r.Leases, `SELECT COUNT(*) FROM leases`},
		{&r.Transfers, `SELECT COUNT(*) FROM transfers`},
		{&r.AuditEntries, `SELECT size FROM audit_log WHERE id = 1`},
	} {
		if err := db.QueryRowContext(ctx, q.query).Scan(q.to); err != nil {
			return err
		}
	}
	var signed bool // a database from before 00023_audit_signer has no signer
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM pragma_table_info('audit_log') WHERE name = 'signer'`).Scan(&signed); err != nil || !signed {
		return err
	}
	return db.QueryRowContext(ctx, `SELECT signer FROM audit_log WHERE id = 1`).Scan(&r.AuditSigner)
}

// syncFile flushes a file, or a directory's entries, to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("backup: sync %s: %w", path, err)
	}
	return nil
}
