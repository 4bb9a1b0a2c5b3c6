package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

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
// its session, which holds it, still does, unless LockMarket is told.
const DefaultMarketLockCheck = 10 * time.Second

// marketLockChecks is how many check intervals a PostgreSQL market lock
// may go without a check that succeeds before it counts as lost. While the
// session that holds the lock lives, PostgreSQL keeps the lock for it, so
// a stall (the database slow, the network dropping packets) shorter than
// that is waited out on the same session. Longer, the server cannot tell
// a stall from a session PostgreSQL has ended, whose lock another server
// may have taken: it gives up, so that two engines overlap by that much at
// most.
const marketLockChecks = 3

// MarketLock is a server's hold on the market in its database, kept until
// Close. On PostgreSQL the lock lives as long as the session that took it.
// A session that ended (its connection broke, or someone terminated its
// backend) has let the lock go, and another server may hold it by now, so
// the lock is lost at once and never taken again behind the server's
// back; so it is when no check has succeeded for marketLockChecks check
// intervals. Lost is closed then, and the server must stop running the
// market.
type MarketLock struct {
	file *dirlock.Lock      // SQLite: a lock on the file beside the database
	conn *sql.Conn          // PostgreSQL: the session holding the advisory lock; owned by watch once it runs
	poke chan chan struct{} // a check now, answered when done (tests)
	lost chan struct{}
	err  error              // why the lock was lost; written before lost closes
	ctx  context.Context    // ends at Close, and with it a check in flight
	stop context.CancelFunc // ends ctx
	done chan struct{}
}

// LockMarket takes the market lock without waiting: ErrMarketLocked, with
// who holds it, when another server does. On PostgreSQL its session is
// checked every check (0: DefaultMarketLockCheck). An in-memory SQLite
// database is its process's alone and needs none.
func (db *DB) LockMarket(ctx context.Context, check time.Duration) (*MarketLock, error) {
	if check <= 0 {
		check = DefaultMarketLockCheck
	}
	l := &MarketLock{poke: make(chan chan struct{}), lost: make(chan struct{}), done: make(chan struct{})}
	l.ctx, l.stop = context.WithCancel(context.Background())
	switch {
	case db.dialect == postgresDialect:
		conn, err := db.lockPostgres(ctx)
		if err != nil {
			return nil, err
		}
		l.conn = conn
		go l.watch(check)
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

// watch checks the lock's session every every until Close, or until the
// lock is lost: its session ended, or no check succeeded for
// marketLockChecks intervals. A check that fails otherwise (the database
// stalled, or refused the query) is tried again at the next, on the same
// session: letting the session go would let the lock go.
func (l *MarketLock) watch(every time.Duration) {
	defer close(l.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	giveUp := marketLockChecks * every
	okAt := time.Now()
	for {
		var answer chan struct{}
		select {
		case <-l.ctx.Done():
			unlock(l.conn)
			return
		case <-tick.C:
		case answer = <-l.poke:
		}
		err := l.check(okAt.Add(giveUp))
		if err == nil {
			okAt = time.Now()
		} else if l.ctx.Err() == nil && (errors.Is(err, errSessionEnded) || time.Since(okAt) >= giveUp) {
			l.lose(err, giveUp)
		}
		if answer != nil {
			close(answer)
		}
		if l.conn == nil {
			return
		}
	}
}

// errSessionEnded is a check's error when the lock's session has ended,
// or no longer holds the lock.
var errSessionEnded = errors.New("the database session that held it ended, and PostgreSQL let it go: another server may hold it now")

// check asks the lock's session whether it still holds the lock, and
// waits for the answer until deadline, since a session that is slow to
// answer still holds it. It returns errSessionEnded when the session has
// ended or lets the lock go; any other error leaves the session as it was.
func (l *MarketLock) check(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(l.ctx, deadline)
	defer cancel()
	var held bool
	err := l.conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l
		WHERE l.pid = pg_backend_pid() AND `+marketLockRow("l")+`)`).Scan(&held)
	switch {
	case err == nil && !held:
		return errSessionEnded
	case err == nil || ctx.Err() != nil:
		return err
	case sessionEnded(l.conn):
		return fmt.Errorf("%w (%v)", errSessionEnded, err)
	}
	return err
}

// sessionEnded reports whether conn's session is over: database/sql gave
// it up, or pgx closed it after a network error or a FATAL one, such as
// the backend's termination.
func sessionEnded(conn *sql.Conn) bool {
	errClosed := errors.New("closed")
	return conn.Raw(func(dc any) error {
		if c, ok := dc.(*stdlib.Conn); ok && c.Conn().IsClosed() {
			return errClosed
		}
		return nil
	}) != nil
}

// lose gives the lock up, closing its session in case it still holds it,
// and says why in Err.
func (l *MarketLock) lose(err error, giveUp time.Duration) {
	if !errors.Is(err, errSessionEnded) {
		err = fmt.Errorf("no check of it succeeded for %s, the last failing with %v: another server may hold it now", giveUp, err)
	}
	l.err = err
	discard(l.conn)
	l.conn = nil
	close(l.lost)
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

// Lost is closed when the lock is lost: the server must stop running the
// market at once. Err says why.
func (l *MarketLock) Lost() <-chan struct{} { return l.lost }

// Err says why the lock was lost, once Lost is closed; nil before.
func (l *MarketLock) Err() error {
	select {
	case <-l.lost:
		return l.err
	default:
		return nil
	}
}

// Close lets the market lock go.
func (l *MarketLock) Close() error {
	if l.file != nil {
		return l.file.Release()
	}
	l.stop()
	<-l.done
	return nil
}
