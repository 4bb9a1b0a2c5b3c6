package sqlstore

import (
	"context"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
)

// KeepLogLines makes db keep n of a lease's latest lines, not
// MaxLogLinesKept.
func KeepLogLines(db *DB, n int64) { db.logsKept.Store(n) }

// BatchesRedone returns how many batches of placements db placed again
// behind savepoints after one of them failed.
func BatchesRedone(db *DB) int64 { return db.batchesRedone.Load() }

// Remigrate takes db's schema down to version and up again, so that the
// later migrations run on the data as an upgrade from version would.
func Remigrate(ctx context.Context, db *DB, version int64) error {
	return RemigrateWith(ctx, db, version, "")
}

// RemigrateWith is Remigrate that runs q with args, unless q is "", on
// the schema at version, between the way down and the way up: rows as a
// server of that version wrote them.
func RemigrateWith(ctx context.Context, db *DB, version int64, q string, args ...any) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(db.dialect.goose, db.db, fsys, goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(goMigrations()...))
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		return err
	}
	if q != "" {
		if _, err := db.db.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	_, err = p.Up(ctx)
	return err
}

// CheckLedgerSums runs the backup's check of the double entry on db: each
// posting sums to zero, each balance row (its balance, credited and
// refunded) is its account's entries', and the balances sum to zero.
func CheckLedgerSums(ctx context.Context, db *DB) error { return checkLedgerSums(ctx, db.db) }

// LedgerScanTotals sums what providers earned and the platform's fees
// (net of what penalties refunded) from every entry of the ledger, as
// Summary did before the balances kept them: the baseline of
// BenchmarkSummary.
func LedgerScanTotals(ctx context.Context, db *DB) (earned, fees int64, err error) {
	const refunds = `SELECT CAST(COALESCE(SUM(-e.amount), 0) AS BIGINT) FROM transfers r JOIN ledger_entries e ON e.transfer_id = r.id
		WHERE r.kind = 'penalty' AND e.amount < 0`
	var gross, refunded [2]int64
	for _, x := range []struct {
		to *int64
		q  string
	}{
		{&gross[0], `SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM ledger_entries WHERE account LIKE 'provider:%:pending' AND amount > 0`},
		{&refunded[0], refunds + ` AND e.account LIKE 'provider:%:pending'`},
		{&gross[1], `SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM ledger_entries WHERE account = 'platform:fees' AND amount > 0`},
		{&refunded[1], refunds + ` AND e.account = 'platform:fees'`},
	} {
		if err := db.db.QueryRowContext(ctx, x.q).Scan(x.to); err != nil {
			return 0, 0, err
		}
	}
	return gross[0] - refunded[0], gross[1] - refunded[1], nil
}

// CheckMarketLock has l check its connection now, and returns once it has.
func CheckMarketLock(l *MarketLock) {
	answer := make(chan struct{})
	select {
	case l.poke <- answer:
		<-answer
	case <-l.done:
	}
}

// MarketLockHolderName is the application_name of the PostgreSQL session
// that holds the market lock, as db reads pg_stat_activity.
func MarketLockHolderName(ctx context.Context, db *DB) (string, error) {
	var name string
	err := db.db.QueryRowContext(ctx, `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE `+marketLockRow("l")).Scan(&name)
	return name, err
}

// KillMarketLock ends, from db, the PostgreSQL session that holds the
// market lock, as a broken connection would, and waits until the lock is
// free.
func KillMarketLock(ctx context.Context, db *DB) error {
	if _, err := db.db.ExecContext(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l WHERE `+marketLockRow("l")); err != nil {
		return err
	}
	for {
		var held bool
		if err := db.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE `+marketLockRow("l")+`)`).Scan(&held); err != nil || !held {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
