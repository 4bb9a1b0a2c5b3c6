package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid/internal/dirlock"
)

// One server runs the market on a database: its engine is the only one
// placing jobs there, and its reapers the only ones ending leases. A
// second server started on the same database by mistake (two replicas,
// an overlapping upgrade) would place against a market it does not see.
// The store's constraints keep a GPU from being leased twice, but the
// second server's work would be refused and redone over and over. So the
// server takes the market lock before it serves, and a second one is
// refused at start, saying which server holds it. When several servers
// share one PostgreSQL database, the lock will choose which one runs the
// engine.

// ErrMarketLocked is LockMarket's answer when another server holds the
// lock.
var ErrMarketLocked = errors.New("another idlegrid server is running the market on this database")

// marketLockKey is the PostgreSQL advisory lock's key, a constant of our
// choosing; nothing else in the database takes an advisory lock but
// goose's migrations, under a key of their own.
const marketLockKey int64 = 0x1d1e_9d1d

// DefaultMarketLockCheck is how often a PostgreSQL market lock checks that
// its connection, which holds it, is alive, unless LockMarket is told.
const DefaultMarketLockCheck = 10 * time.Second

// MarketLock is a server's hold on the market in its database, kept until
// Close. On PostgreSQL the lock lives as long as one connection: if the
// connection breaks, the lock is taken again on a new one; if meanwhile
// another server took it, Lost is closed and the server must stop.
type MarketLock struct {
	file *dirlock.Lock      // SQLite: a lock on the file beside the database
	conn *sql.Conn          // PostgreSQL: the session holding the advisory lock; owned by watch once it runs
	poke chan chan struct{} // a check now, answered when done (tests)
	lost chan struct{}
	stop chan struct{}
	done chan struct{}
}

// LockMarket takes the market lock without waiting: ErrMarketLocked, with
// who holds it, when another server does. On PostgreSQL its connection is
// checked every check (0: DefaultMarketLockCheck). An in-memory SQLite
// database is its process's alone and needs none.
func (db *DB) LockMarket(ctx context.Context, check time.Duration) (*MarketLock, error) {
	if check <= 0 {
		check = DefaultMarketLockCheck
	}
	l := &MarketLock{poke: make(chan chan struct{}), lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	switch {
	case db.dialect == postgresDialect:
		conn, err := db.lockPostgres(ctx)
		if err != nil {
			return nil, err
		}
		l.conn = conn
		go l.watch(db, check)
		return l, nil
	case db.path != "":
		file, err := dirlock.TakeFile(db.path + "-lock")
		if errors.Is(err, dirlock.ErrHeld) {
			return nil, fmt.Errorf("%w (%v)", ErrMarketLocked, err)
		} else if err != nil {
			return nil, fmt.Errorf("lock the market: %w", err)
		}
		l.file = file
	}
	close(l.done)
	return l, nil
}

// lockPostgres takes the advisory lock on a connection of its own, which
// it returns; ErrMarketLocked naming the holder's address and start when
// another session holds it.
func (db *DB) lockPostgres(ctx context.Context) (*sql.Conn, error) {
	conn, err := db.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock the market: %w", err)
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, marketLockKey).Scan(&ok); err != nil {
		discard(conn)
		return nil, fmt.Errorf("lock the market: %w", err)
	} else if ok {
		return conn, nil
	}
	defer conn.Close()
	var addr string
	var since time.Time
	err = conn.QueryRowContext(ctx, `SELECT COALESCE(host(a.client_addr), 'a local socket'), a.backend_start
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE `+marketLockRow("l")+`
		LIMIT 1`).Scan(&addr, &since)
	if err != nil { // it may have let go meanwhile
		return nil, ErrMarketLocked
	}
	return nil, fmt.Errorf("%w (the server connected from %s since %s)", ErrMarketLocked, addr, since.UTC().Format(time.RFC3339))
}

// marketLockRow is the condition on pg_locks, as alias, that picks the
// market lock of this database: advisory locks are the database's own,
// but pg_locks lists the whole cluster's. A bigint key is classid (its
// high half), objid (its low half) and objsubid 1.
func marketLockRow(alias string) string {
	return alias + `.locktype = 'advisory' AND ` + alias + `.granted AND ` + alias + `.classid = 0 AND ` +
		alias + `.objid::bigint = ` + fmt.Sprint(marketLockKey) + ` AND ` + alias + `.objsubid = 1 AND ` +
		alias + `.database = (SELECT oid FROM pg_database WHERE datname = current_database())`
}

// watch checks the lock's connection every every until Close. A broken
// one is replaced, the lock taken again on the new one; the lock is lost
// if another server took it meanwhile.
func (l *MarketLock) watch(db *DB, every time.Duration) {
	defer close(l.done)
	defer func() {
		if l.conn != nil {
			unlock(l.conn)
		}
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		var answer chan struct{}
		select {
		case <-l.stop:
			return
		case <-tick.C:
		case answer = <-l.poke:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(every, DefaultMarketLockCheck))
		err := l.keep(ctx, db)
		cancel()
		if errors.Is(err, ErrMarketLocked) {
			close(l.lost)
		}
		if answer != nil {
			close(answer)
		}
		if errors.Is(err, ErrMarketLocked) {
			return
		}
	}
}

// keep checks the lock's connection, and takes the lock again on a new
// one if it broke. An error other than ErrMarketLocked (the database
// unreachable) leaves it to try again at the next check.
func (l *MarketLock) keep(ctx context.Context, db *DB) error {
	if l.conn != nil {
		if l.conn.PingContext(ctx) == nil {
			return nil
		}
		discard(l.conn)
		l.conn = nil
	}
	conn, err := db.lockPostgres(ctx)
	if err != nil {
		return err
	}
	l.conn = conn
	return nil
}

// unlock lets the advisory lock go on its own session before discarding
// it: a closed session's backend ends, and frees its locks, some time
// after the client hangs up, and a server started at once would be
// refused meanwhile.
func unlock(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, marketLockKey) // on failure, the hang-up frees it
	discard(conn)
}

// discard closes the session of a connection that holds, or may hold, the
// advisory lock, which ends with the session: back in the pool, it would
// keep the lock for whatever query next borrowed it.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn }) // database/sql then closes it
	conn.Close()
}

// Lost is closed when the lock was lost to another server.
func (l *MarketLock) Lost() <-chan struct{} { return l.lost }

// Close lets the market lock go.
func (l *MarketLock) Close() error {
	if l.file != nil {
		return l.file.Release()
	}
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	return nil
}
