// Package sqlstore is the one implementation of idlegrid.Store, on
// database/sql. It runs on SQLite (modernc.org/sqlite, pure Go) for a single
// coordinator and on PostgreSQL (pgx) for several coordinators sharing one
// database. Both run the same SQL; the few differences live in dialect.go.
//
// Every Store method owns exactly one transaction and helpers take the
// *sql.Tx, so that a ledger posting commits together with the lease change
// that caused it, or not at all. Driver errors are translated into
// *idlegrid.Error before they leave the package.
//
// Times are stored as BIGINT unix microseconds in UTC, so a time truncated to
// the microsecond (as idlegrid.SystemClock makes them) round-trips exactly.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DefaultLimit caps a list whose filter asks for no limit.
const DefaultLimit = 1000

// DB is the store. It is safe for concurrent use.
type DB struct {
	db      *sql.DB
	dialect *dialect
	path    string // the SQLite file; "" in memory and on PostgreSQL
	// writer queues this process's write transactions on SQLite, which runs
	// one at a time anyway: waiting here costs nothing, while a writer that
	// finds the database locked waits in SQLite's busy handler, which
	// sleeps 1, 2, 5, … 100 ms between tries. It is the one turn to write,
	// a channel of one rather than a sync.Mutex, so that a transaction
	// waiting its turn is durably blocked in a testing/synctest bubble:
	// behind a mutex the bubble never idles, its clock stands still, and a
	// writer asleep in the busy handler (the file locked for a moment by
	// another handle, or by a connection the pool closes) never wakes.
	writer chan struct{}
	// jobQueue commits concurrent CreateJob calls together (jobbatch.go).
	jobQueue lazyGroupCommit[jobRow]
	// writeQueue commits concurrent heartbeats together (writebatch.go).
	writeQueue lazyGroupCommit[write]
	// batchesRedone counts the batches of placements placed again behind
	// savepoints after one failed (batch.go).
	batchesRedone atomic.Int64
	metrics       *storeMetrics // metrics.go
	// logsKept is how many of a lease's latest lines AppendLogs keeps:
	// MaxLogLinesKept, less in tests.
	logsKept atomic.Int64
}

var _ idlegrid.Store = (*DB)(nil)

// ErrNoPrivilege is Open's answer, wrapping the database's, when the
// PostgreSQL role in the URL reaches the database but may not create or
// change the market's tables: it needs to own them, and the database.
var ErrNoPrivilege = errors.New("the database role may not create or change the market's tables")

// ErrSchemaNewer is Open's answer when the database has migrations this
// binary does not know: a newer idlegrid migrated it, and this older one
// would run the market on tables it was not written for.
var ErrSchemaNewer = errors.New("the database was migrated by a newer idlegrid")

// Open opens the store named by dsn and brings its schema up to date. A dsn
// starting with postgres:// or postgresql:// is a PostgreSQL URL; anything
// else is the path of a SQLite file, created if missing.
func Open(ctx context.Context, dsn string) (*DB, error) {
	d := dialectFor(dsn)
	conn, err := d.open(dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", d.name, err)
	}
	if err := conn.PingContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("open %s store: %w", d.name, err)
	}
	if err := migrate(ctx, conn, d); err != nil {
		conn.Close()
		if insufficientPrivilege(err) {
			return nil, fmt.Errorf("migrate %s store: %w: %w", d.name, ErrNoPrivilege, err)
		}
		return nil, fmt.Errorf("migrate %s store: %w", d.name, err)
	}
	return &DB{db: conn, dialect: d, path: sqlitePath(d, dsn), writer: make(chan struct{}, 1), metrics: newStoreMetrics()}, nil
}

// sqlitePath is the SQLite file dsn names, or "" for PostgreSQL and an
// in-memory database.
func sqlitePath(d *dialect, dsn string) string {
	if d != sqliteDialect {
		return ""
	}
	if path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?"); path != ":memory:" {
		return path
	}
	return ""
}

// migrate applies the embedded migrations that the database lacks.
func migrate(ctx context.Context, conn *sql.DB, d *dialect) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true), goose.WithGoMigrations(goMigrations()...)}
	if d.locker != nil {
		locker, err := d.locker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(d.goose, conn, fsys, opts...)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return err
	}
	// Up leaves alone a database ahead of the migrations it knows.
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return err
	}
	var known int64
	for _, src := range p.ListSources() {
		known = max(known, src.Version)
	}
	if current > known {
		return fmt.Errorf("%w: it is at migration %d, and this idlegrid knows those up to %d", ErrSchemaNewer, current, known)
	}
	return nil
}

// Close closes the database.
func (db *DB) Close() error { return db.db.Close() }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.db.PingContext(ctx); err != nil {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "database unavailable")
	}
	return nil
}

// update runs fn in a write transaction and commits it if fn returns nil.
// A transaction the database aborted to break a deadlock is retried.
func (db *DB) update(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if db.dialect == sqliteDialect {
		start := time.Now()
		db.writer <- struct{}{}
		defer func() { <-db.writer }()
		db.metrics.writerWait.Observe(time.Since(start).Seconds())
	}
	return db.inTx(ctx, nil, fn)
}

// view runs fn in a read-only transaction, so that a method that reads
// several tables sees one snapshot: SQLite's read transactions do; on
// PostgreSQL it takes REPEATABLE READ, since at its default, READ
// COMMITTED, each statement would see what had committed by then (a
// balance read between its available and held parts could count a
// settlement's refund twice, or not at all). A read-only transaction at
// that level is never aborted for a conflict.
func (db *DB) view(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.inTx(ctx, db.dialect.view, fn)
}

func (db *DB) inTx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	const attempts = 3
	start := time.Now()
	defer db.metrics.observeTx(opts, start)
	var err error
	for i := 0; i < attempts; i++ {
		if err = db.tryTx(ctx, opts, fn); !db.dialect.retryable(err) {
			break
		}
		if i+1 < attempts {
			db.metrics.retries.Inc()
		}
	}
	return db.dialect.translate(err)
}

func (db *DB) tryTx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := db.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	defer auditDrop(tx)
	if err := fn(tx); err != nil {
		return err
	}
	if _, err := flushAudit(ctx, tx); err != nil { // last, see audit.go
		return err
	}
	return tx.Commit()
}

// notFound is the error for a missing object of the named kind.
func notFound(kind, id string) error {
	return idlegrid.Errorf(idlegrid.ENOTFOUND, "%s %q not found", kind, id)
}

// required returns EINVALID when v is empty.
func required(field, v string) error {
	if v == "" {
		return idlegrid.Invalid(field, "required")
	}
	return nil
}

// expectOne turns "no row changed" into err.
func expectOne(res sql.Result, err error, none func() error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	} else if n == 0 {
		return none()
	}
	return nil
}

// limitOf returns the row cap for a list: n, or DefaultLimit when the
// filter asks for no limit. Callers that face the network bound n first;
// the coordinator asks for every live lease with a huge n.
func limitOf(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return n
}

// args collects query arguments and hands out their $N placeholders, which
// both SQLite and PostgreSQL understand.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// queryAll runs q in tx and scans every row it returns with scan.
func queryAll[T any](ctx context.Context, tx *sql.Tx, scan func(scanner) (*T, error), q string, a ...any) ([]*T, error) {
	rows, err := tx.QueryContext(ctx, q, a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func in[T ~string](a *args, vs []T) string {
	ps := make([]string, len(vs))
	for i, v := range vs {
		ps[i] = a.add(string(v))
	}
	return "(" + strings.Join(ps, ", ") + ")"
}

// goMigrations are the migrations written in Go, beside the SQL ones in
// migrations/.
func goMigrations() []*goose.Migration {
	return []*goose.Migration{spendMonthsMigration, nodeSearchMigration, nodePriceMigration, jobTierMigration, registryLoginsActiveMigration,
		nodeNameMigration, spendRefundsMigration}
}

// Times are unix microseconds in UTC; the zero time and nil are NULL.

func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func timePtrArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return timeArg(*t)
}

func timeOf(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

func timePtrOf(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := timeOf(v)
	return &t
}

// jsonArg encodes a nested value for a JSON text column.
func jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %T: %w", v, err)
	}
	return string(b), nil
}

func jsonOf(s string, v any) error {
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}

// isCode reports whether err is an *idlegrid.Error with code.
func isCode(err error, code string) bool {
	var e *idlegrid.Error
	return errors.As(err, &e) && e.Code == code
}
