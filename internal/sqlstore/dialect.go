package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between SQLite and PostgreSQL. Everything else,
// placeholders ($N) and upserts (ON CONFLICT … DO UPDATE … RETURNING)
// included, is the same SQL on both.
type dialect struct {
	name  string
	goose goose.Dialect
	open  func(dsn string) (*sql.DB, error)
	// locker serializes migrations between coordinators sharing a database.
	locker func() (lock.SessionLocker, error)
	// forUpdate is appended to a SELECT that reads a row the transaction
	// will change, so that concurrent writers queue on it. SQLite needs
	// none: its write transactions are already serial.
	forUpdate string
	// forNodeUpdate locks a node's row against other writers of it, but
	// not against inserting the rows that refer to it (a lease, a GPU
	// claim), which FOR UPDATE would make wait too.
	forNodeUpdate string
	// code classifies a driver error as an idlegrid code, or "".
	code func(err error) string
	// down reports whether err says the database server cannot be
	// reached or will not serve a session now (nil: it never says so).
	down func(err error) bool
	// texts is a subquery of the strings of the JSON array in parameter p,
	// for "x IN (…)" over more values than a statement takes parameters.
	texts func(p string) string
	// jsonText is the text of field key of the JSON object in column col.
	jsonText func(col, key string) string
	// view is how a read-only transaction begins (DB.view).
	view *sql.TxOptions
}

func dialectFor(dsn string) *dialect {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return postgresDialect
	}
	return sqliteDialect
}

var postgresDialect = &dialect{
	name:          "postgres",
	goose:         goose.DialectPostgres,
	open:          openPostgres,
	locker:        func() (lock.SessionLocker, error) { return lock.NewPostgresSessionLocker() },
	forUpdate:     " FOR UPDATE",
	forNodeUpdate: " FOR NO KEY UPDATE",
	code:          postgresCode,
	down:          postgresDown,
	texts:         func(p string) string { return `SELECT json_array_elements_text(` + p + `::json)` },
	jsonText:      func(col, key string) string { return `(` + col + `::json->>'` + key + `')` },
	view:          &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead},
}

var sqliteDialect = &dialect{
	name:     "sqlite",
	goose:    goose.DialectSQLite3,
	open:     openSQLite,
	code:     sqliteCode,
	texts:    func(p string) string { return `SELECT value FROM json_each(` + p + `)` },
	jsonText: func(col, key string) string { return `json_extract(` + col + `, '$.` + key + `')` },
	view:     &sql.TxOptions{ReadOnly: true},
}

func openPostgres(dsn string) (*sql.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(8)
	return db, nil
}

// sqlitePragmas make a SQLite file fit for many concurrent handlers: WAL
// lets readers run beside the writer; busy_timeout makes a second writer
// wait instead of failing; _txlock=immediate takes the write lock at BEGIN,
// so two writers never both read and then deadlock upgrading their locks.
// Read-only transactions still begin deferred. temp_store(MEMORY) keeps the
// savepoint journals of PlaceJobs in memory rather than in temporary files;
// cache_size lets a batch of placements touch 64 MiB of pages without
// spilling them to the WAL before it commits.
const sqlitePragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
	"&_pragma=foreign_keys(1)&_pragma=temp_store(MEMORY)&_pragma=cache_size(-65536)&_txlock=immediate"

// sqliteSynchronous is the durability of a commit unless the DSN sets its
// own, e.g. idlegrid.db?_pragma=synchronous(FULL). In WAL mode NORMAL
// syncs the WAL at each checkpoint, not at each commit: a commit survives
// the process crashing, but the power failing or the OS crashing may undo
// the last transactions before the next checkpoint (never half of one).
// FULL syncs the WAL at every commit. See BENCHMARKS.md for what each costs.
const sqliteSynchronous = "&_pragma=synchronous(NORMAL)"

// sqliteIdleConns is how many connections the pool keeps open between
// uses, and sqliteIdleTime how long one may wait unused before it is
// closed. A new SQLite connection reads and parses the whole schema at its
// first statement, so a pool that kept only database/sql's default of two
// opened and parsed again for nearly every request beyond the second at
// once; the idle time still gives a quiet server's page caches back.
const (
	sqliteIdleConns = 16
	sqliteIdleTime  = 5 * time.Minute
)

func openSQLite(dsn string) (*sql.DB, error) {
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if path == "" {
		return nil, idlegrid.Invalid("dsn", "needs a SQLite file path or a postgres:// URL")
	}
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := createPrivate(path); err != nil {
			return nil, err
		}
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	pragmas := sqlitePragmas
	if !strings.Contains(dsn, "synchronous") {
		pragmas += sqliteSynchronous
	}
	db := sql.OpenDB(stmtCacheConnector{dsn: dsn + sep + pragmas, driver: sqliteDriver})
	if path == ":memory:" {
		db.SetMaxOpenConns(1) // every connection would be its own database
		return db, nil        // and is never closed for idling: it is the database
	}
	db.SetMaxIdleConns(sqliteIdleConns)
	db.SetConnMaxIdleTime(sqliteIdleTime)
	return db, nil
}

// createPrivate creates a missing database file with mode 0600, which
// SQLite gives its -wal and -shm files too: the market holds renters' job
// environments, key hashes and the ledger, for the server's user alone.
// An existing file keeps its mode.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	} else if err != nil {
		return err
	}
	return f.Close()
}

// When a caller should send again a request the database could not serve:
// a database down comes back in seconds (a restart, a failover) or not
// soon, and asking sooner only adds to a pool of clients waiting for it;
// a busy one (a lock, a serialization failure) is free again at once.
const (
	downRetry = 5 * time.Second
	busyRetry = time.Second
)

// translate turns a driver error into an *idlegrid.Error where it has a
// meaning in the market; other errors are returned as they are, and the API
// reports them as internal. A database that is down or busy is
// EUNAVAILABLE, a 503 that says to try again, and when (Retry-After:
// downRetry, busyRetry), which keeps the driver's error as its cause for
// the server's log and shows the caller none of it.
func (d *dialect) translate(err error) error {
	var e *idlegrid.Error
	switch {
	case err == nil || errors.As(err, &e):
		return err
	case errors.Is(err, sql.ErrNoRows):
		return idlegrid.Errorf(idlegrid.ENOTFOUND, "not found")
	}
	if d.down != nil && d.down(err) {
		e := idlegrid.Wrap(fmt.Errorf("%s: %w", d.name, err), idlegrid.EUNAVAILABLE, "the database is unavailable; try again shortly")
		e.RetryAfter = downRetry
		return e
	}
	switch d.code(err) {
	case idlegrid.ECONFLICT:
		return idlegrid.Errorf(idlegrid.ECONFLICT, "already exists")
	case idlegrid.ENOTFOUND:
		return idlegrid.Errorf(idlegrid.ENOTFOUND, "refers to an object that does not exist")
	case idlegrid.EUNAVAILABLE:
		e := idlegrid.Wrap(fmt.Errorf("%s: %w", d.name, err), idlegrid.EUNAVAILABLE, "database busy; try again")
		e.RetryAfter = busyRetry
		return e
	case idlegrid.EINVALID: // what the API did not catch, by field, before
		return idlegrid.Errorf(idlegrid.EINVALID, "text must be UTF-8 without the NUL character")
	}
	return fmt.Errorf("%s: %w", d.name, err)
}

// retryable reports whether the database aborted the transaction only to
// break a deadlock or a serialization conflict, so that running it again
// may succeed.
func (d *dialect) retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

func postgresCode(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return ""
	}
	switch pe.Code {
	case "23505": // unique_violation
		return idlegrid.ECONFLICT
	case "23503": // foreign_key_violation
		return idlegrid.ENOTFOUND
	case "40001", "40P01", "55P03": // serialization, deadlock, lock_not_available
		return idlegrid.EUNAVAILABLE
	case "22021", "22P05": // character_not_in_repertoire, untranslatable_character
		return idlegrid.EINVALID // the caller's text: not UTF-8, or a NUL
	}
	return ""
}

// postgresDown reports whether err says PostgreSQL cannot be reached or
// will not serve a session now, which waiting mends: a dial that failed
// (refused, reset, no route, a connect timeout), a connection lost (its
// socket closed, SQLSTATE class 08), too many clients (53300), or a server shutting
// down, restarting or still starting (57P01, 57P02, 57P03). A refused
// login (28xxx), a missing database (3D000) or a bad statement is not: no
// retry mends those, and they stay internal errors.
func postgresDown(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "53300", "57P01", "57P02", "57P03":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	}
	if errors.Is(err, context.Canceled) {
		return false // the caller left; the API says so (httpapi translateContextError)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded)
	case errors.Is(err, context.DeadlineExceeded):
		return false // a statement the request's time ran out on
	}
	// A connection lost: the socket failed or closed under a statement
	// (nothing in the store reads with io but the driver), or the driver
	// had closed it for that before.
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, pgconn.ErrConnClosed)
}

// insufficientPrivilege reports whether err is PostgreSQL's refusal of a
// statement the role has no privilege for (SQLSTATE 42501).
func insufficientPrivilege(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501"
}

func sqliteCode(err error) string {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return ""
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return idlegrid.ECONFLICT
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return idlegrid.ENOTFOUND
	}
	switch se.Code() & 0xff { // primary result code
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return idlegrid.EUNAVAILABLE
	}
	return ""
}
