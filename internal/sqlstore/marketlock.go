package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/dirlock"
)

// One server runs the market on a database: its engine is the only one
// placing jobs there, and its reapers the only ones ending leases. A
// second server started on the same database by mistake (two replicas,
// an overlapping upgrade) would place against a market it does not see.
// The store's constraints keep a GPU from being leased twice, but the
// second server's work would be refused and redone over and over. So the
// server takes the market lock before it migrates the schema and serves
// (OpenLocked), and a second one is refused at start, saying which server
// holds it. When several servers share one PostgreSQL database, the lock
// will choose which one runs the engine.
//
// On PostgreSQL the lock is an advisory lock, which lives as long as the
// session that took it. The server asks that session every check interval
// whether it still holds the lock. A session that is slow to answer (the
// database stalled, the network dropping packets) may hold it still; one
// that ended (its connection broke, its backend was terminated) has let it
// go, and another server may have taken it. Either way the lock is in
// doubt, and placing waits (Hold, GuardedDB) until the lock is sure again:
// the session answers, or the lock is taken again on a new session, after
// which the engine rebuilds its view from the store, since another server
// may have placed meanwhile. The lock is lost only when another server
// holds it, or when it has stayed in doubt for the grace (the database
// unreachable that long); the server must then stop running the market.
// Two engines can overlap only between a session's end and the next
// check, by a check interval at most.

// ErrMarketLocked is LockMarket's answer when another server holds the
// lock.
var ErrMarketLocked = errors.New("another idlegrid server is running the market on this database")

// marketLockKey is the PostgreSQL advisory lock's key, a constant of our
// choosing; nothing else in the database takes an advisory lock but
// goose's migrations, under a key of their own.
const marketLockKey int64 = 0x1d1e_9d1d

// DefaultMarketLockCheck is how often a PostgreSQL market lock checks that
// its session, which holds it, still does, unless told.
const DefaultMarketLockCheck = 10 * time.Second

// marketLockChecks is how many check intervals a PostgreSQL market lock may
// stay in doubt before it is lost, unless its grace is told.
const marketLockChecks = 3

// DefaultMarketLockGrace is how long a PostgreSQL market lock may stay in
// doubt before it is lost, with the default check interval.
const DefaultMarketLockGrace = marketLockChecks * DefaultMarketLockCheck

// marketLockRetry is the first wait between two tries to confirm a lock in
// doubt; each wait doubles, up to a check interval.
const marketLockRetry = 250 * time.Millisecond

// MarketLockConfig says how a PostgreSQL market lock is kept; zero values
// take the defaults. A SQLite lock needs none of it.
type MarketLockConfig struct {
	// Check is how often the lock's session is asked whether it still
	// holds the lock; default DefaultMarketLockCheck.
	Check time.Duration
	// Grace is how long the lock may stay in doubt, from the check that
	// began it, the database not confirming it, before it is lost;
	// default three check intervals.
	Grace  time.Duration
	Logger *slog.Logger // says when the lock is in doubt and sure again; nil: nowhere
	Clock  LockClock    // nil: the wall clock
}

// LockClock is the time a market lock keeps: it tells the time and waits
// for it. Tests step it.
type LockClock interface {
	idlegrid.Clock
	After(d time.Duration) <-chan time.Time
}

// wallClock is the LockClock of time.Now and time.After.
type wallClock struct{ idlegrid.SystemClock }

func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// MarketLock is a server's hold on the market in its database, kept until
// Close. Lost is closed when the lock is lost, and the server must stop
// running the market then.
type MarketLock struct {
	file *dirlock.Lock // SQLite: a lock on the file beside the database

	// PostgreSQL:
	pool    *sql.DB   // where the lock's sessions come from
	ownPool bool      // pool is the lock's own, closed at Close
	conn    *sql.Conn // the session holding the advisory lock, nil once it ended; owned by watch once it runs
	session backend   // conn's backend

	check, grace time.Duration
	clock        LockClock
	log          *slog.Logger

	poke chan chan struct{} // a check now, answered when done (tests)
	lost chan struct{}
	err  error              // why the lock was lost; written before lost closes
	ctx  context.Context    // ends at Close, and with it a check in flight
	stop context.CancelFunc // ends ctx
	done chan struct{}      // closed when watch has returned

	mu    sync.Mutex
	held  chan struct{} // closed while the lock is sure; open while it is in doubt
	doubt chan struct{} // closed while the lock is in doubt
	term  uint64        // 1, and one more each time the lock is taken again on a new session
	why   error         // while in doubt: why
	since time.Time     // while in doubt: since when
}

// backend is a PostgreSQL session, as pg_stat_activity tells them apart.
type backend struct {
	pid   int32
	start time.Time
}

func (b backend) is(o backend) bool { return b.pid == o.pid && b.start.Equal(o.start) }

// heldError is ErrMarketLocked saying which session holds the lock.
type heldError struct {
	by   backend
	addr string // the holder's client address
}

func (e *heldError) Error() string {
	return fmt.Sprintf("%v (the server connected from %s since %s)", ErrMarketLocked, e.addr, e.by.start.UTC().Format(time.RFC3339))
}

func (e *heldError) Unwrap() error { return ErrMarketLocked }

// errHolderGone is a try's answer when another session held the lock and
// let it go before it could say which: worth another try.
var errHolderGone = errors.New("another session held the market lock a moment ago and let it go")

// errSessionEnded is a check's error when the lock's session has ended,
// or no longer holds the lock.
var errSessionEnded = errors.New("the database session that held it ended, and PostgreSQL let it go")

// errMarketLockClosed is Hold's answer once the lock is closed.
var errMarketLockClosed = errors.New("the market lock is closed")

func newMarketLock(cfg MarketLockConfig) *MarketLock {
	l := &MarketLock{check: cfg.Check, grace: cfg.Grace, clock: cfg.Clock, log: cfg.Logger,
		poke: make(chan chan struct{}), lost: make(chan struct{}), done: make(chan struct{}),
		held: make(chan struct{}), doubt: make(chan struct{}), term: 1}
	close(l.held)
	if l.check <= 0 {
		l.check = DefaultMarketLockCheck
	}
	if l.grace <= 0 {
		l.grace = marketLockChecks * l.check
	}
	if l.clock == nil {
		l.clock = wallClock{}
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.ctx, l.stop = context.WithCancel(context.Background())
	return l
}

// LockMarket takes the market lock without waiting: ErrMarketLocked, with
// who holds it, when another server does. On PostgreSQL its session is
// checked every check (0: DefaultMarketLockCheck). An in-memory SQLite
// database is its process's alone and needs none. A server takes the lock
// before it migrates the database with OpenLocked.
func (db *DB) LockMarket(ctx context.Context, check time.Duration) (*MarketLock, error) {
	return db.lockMarket(ctx, MarketLockConfig{Check: check})
}

func (db *DB) lockMarket(ctx context.Context, cfg MarketLockConfig) (*MarketLock, error) {
	l := newMarketLock(cfg)
	switch {
	case db.dialect == postgresDialect:
		if err := l.takeFirst(ctx, db.db); err != nil {
			return nil, err
		}
	case db.path != "":
		if err := l.takeFile(db.path); err != nil {
			return nil, err
		}
	}
	l.start()
	return l, nil
}

// OpenLocked takes the market lock of the database dsn names (LockMarket),
// then opens it as Open does, migrating it: a server that is refused the
// lock (a second replica, a new version started while the old one still
// runs) stops before it changes the schema under the server running the
// market. On PostgreSQL the lock's sessions come from a pool of their own,
// which a busy store cannot starve.
func OpenLocked(ctx context.Context, dsn string, cfg MarketLockConfig) (*DB, *MarketLock, error) {
	d := dialectFor(dsn)
	l := newMarketLock(cfg)
	if d == postgresDialect {
		pool, err := d.open(dsn)
		if err != nil {
			return nil, nil, fmt.Errorf("open %s store: %w", d.name, err)
		}
		pool.SetMaxOpenConns(4) // the session, and a new one with a query beside it while taking the lock again
		pool.SetMaxIdleConns(1)
		l.ownPool = true
		if err := l.takeFirst(ctx, pool); err != nil {
			pool.Close()
			return nil, nil, err
		}
	} else if path := sqlitePath(d, dsn); path != "" {
		if err := l.takeFile(path); errors.Is(err, ErrMarketLocked) {
			return nil, nil, err
		} else if err != nil {
			return nil, nil, fmt.Errorf("open %s store: %w", d.name, err)
		}
	}
	l.start()
	db, err := Open(ctx, dsn)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return db, l, nil
}

// takeFile takes the lock on the file beside the SQLite database at path.
func (l *MarketLock) takeFile(path string) error {
	file, err := dirlock.TakeFile(path + "-lock")
	if errors.Is(err, dirlock.ErrHeld) {
		return fmt.Errorf("%w (%v)", ErrMarketLocked, err)
	} else if err != nil {
		return fmt.Errorf("lock the market: %w", err)
	}
	l.file = file
	return nil
}

// takeFirst takes the advisory lock on a session from pool.
func (l *MarketLock) takeFirst(ctx context.Context, pool *sql.DB) error {
	conn, self, err := takePostgres(ctx, pool)
	if errors.Is(err, errHolderGone) {
		conn, self, err = takePostgres(ctx, pool)
	}
	if errors.Is(err, errHolderGone) {
		err = ErrMarketLocked
	}
	if err != nil {
		return err
	}
	l.pool, l.conn, l.session = pool, conn, self
	return nil
}

// start runs the checks of a PostgreSQL lock until Close.
func (l *MarketLock) start() {
	if l.pool == nil {
		close(l.done)
		return
	}
	go l.watch()
}

// takePostgres takes the advisory lock on a session of its own from pool,
// which it returns with its backend; a *heldError naming the holder's
// address and start when another session holds it.
func takePostgres(ctx context.Context, pool *sql.DB) (*sql.Conn, backend, error) {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return nil, backend{}, fmt.Errorf("lock the market: %w", err)
	}
	if _, err := conn.ExecContext(ctx, lockSessionSettings); err != nil {
		discard(conn)
		return nil, backend{}, fmt.Errorf("lock the market: %w", err)
	}
	var ok bool
	var self backend
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1), pg_backend_pid(),
		(SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())`, marketLockKey).Scan(&ok, &self.pid, &self.start); err != nil {
		discard(conn)
		return nil, backend{}, fmt.Errorf("lock the market: %w", err)
	} else if ok {
		return conn, self, nil
	}
	defer conn.Close()
	var held heldError
	err = conn.QueryRowContext(ctx, `SELECT a.pid, a.backend_start, COALESCE(host(a.client_addr), 'a local socket')
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE `+marketLockRow("l")+`
		LIMIT 1`).Scan(&held.by.pid, &held.by.start, &held.addr)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, backend{}, errHolderGone
	} else if err != nil {
		return nil, backend{}, ErrMarketLocked
	}
	return nil, backend{}, &held
}

// lockSessionSettings are the lock session's own. The lock lives as long
// as its session, and a server whose host dies without hanging up would
// keep it until PostgreSQL noticed the connection dead, by the system's
// keepalives two hours on, refusing its replacement all that while: the
// session asks for probes after 30 s of quiet, every 10 s, and is ended
// after 3 unanswered, about a minute (over TCP; a local socket has none,
// and needs none). It names itself in pg_stat_activity.
const lockSessionSettings = `SELECT set_config('tcp_keepalives_idle', '30', false),
	set_config('tcp_keepalives_interval', '10', false), set_config('tcp_keepalives_count', '3', false),
	set_config('application_name', 'idlegrid market lock', false)`

// marketLockRow is the condition on pg_locks, as alias, that picks the
// market lock of this database: advisory locks are the database's own,
// but pg_locks lists the whole cluster's. A bigint key is classid (its
// high half), objid (its low half) and objsubid 1.
func marketLockRow(alias string) string {
	return alias + `.locktype = 'advisory' AND ` + alias + `.granted AND ` + alias + `.classid = 0 AND ` +
		alias + `.objid::bigint = ` + fmt.Sprint(marketLockKey) + ` AND ` + alias + `.objsubid = 1 AND ` +
		alias + `.database = (SELECT oid FROM pg_database WHERE datname = current_database())`
}

// watch checks the lock every check interval (keep) until Close, or until
// the lock is lost.
func (l *MarketLock) watch() {
	defer close(l.done)
	for {
		var answer chan struct{}
		select {
		case <-l.ctx.Done():
			l.release()
			return
		case <-l.clock.After(l.check):
		case answer = <-l.poke:
		}
		err := l.keep()
		if err != nil && l.ctx.Err() == nil {
			l.lose(err)
		}
		if answer != nil {
			close(answer)
		}
		if err != nil {
			l.release()
			return
		}
	}
}

// keep confirms the lock on its session or, once that session has ended,
// takes the lock again on a new one, trying again while it is in doubt.
// It returns nil once the lock is sure, or why it is lost: another server
// holds it (ErrMarketLocked), or it stayed in doubt for the grace from the
// check that began the doubt; or l.ctx's error at Close.
func (l *MarketLock) keep() error {
	over := l.clock.Now().Add(l.grace)
	err := l.ask(over)
	if err == nil {
		l.sure(false)
		return nil
	}
	l.inDoubt(err)
	cause := err
	for wait := min(marketLockRetry, l.check); ; wait = min(2*wait, l.check) {
		if l.conn == nil && l.ctx.Err() == nil { // the session is over, and PostgreSQL let the lock go
			if err = l.retake(); err == nil {
				l.sure(true)
				return nil
			}
		}
		switch {
		case l.ctx.Err() != nil:
			return l.ctx.Err()
		case errors.Is(err, ErrMarketLocked):
			return fmt.Errorf("%v; another server took it before this one could take it again: %w", cause, err)
		case !l.clock.Now().Before(over):
			return fmt.Errorf("the database has not confirmed it for %s, the last try failing with %v: another server may hold it now", l.grace, err)
		}
		select {
		case <-l.ctx.Done():
			return l.ctx.Err()
		case <-l.clock.After(wait):
		}
		if l.conn != nil {
			if err = l.ask(over); err == nil {
				l.sure(false)
				return nil
			}
		}
	}
}

// ask asks the lock's session whether it still holds the lock. A session
// that is slow to answer may hold it still, so ask waits for the answer
// until the doubt's grace is over (at over), when it gives the session up;
// it puts the lock in doubt meanwhile once a check interval has passed.
// errSessionEnded says the session is over (or given up), and l.conn is
// nil then; any other error leaves the session as it was.
func (l *MarketLock) ask(over time.Time) error {
	ctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	slow := l.clock.After(l.check)
	giveUp := l.clock.After(over.Sub(l.clock.Now()))
	conn := l.conn
	answer := make(chan error, 1)
	go func() { answer <- askSession(ctx, conn) }() // ends with ctx at the latest; waited for below
	for {
		select {
		case err := <-answer:
			if errors.Is(err, errSessionEnded) {
				discard(conn)
				l.conn = nil
			}
			return err
		case <-slow:
			slow = nil
			l.inDoubt(fmt.Errorf("its database session has not answered for %s", l.check))
		case <-giveUp:
			giveUp = nil
			cancel()
		}
	}
}

// askSession asks conn whether it holds the market lock; see ask.
func askSession(ctx context.Context, conn *sql.Conn) error {
	var held bool
	err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l
		WHERE l.pid = pg_backend_pid() AND `+marketLockRow("l")+`)`).Scan(&held)
	switch {
	case err == nil && held:
		return nil
	case err == nil:
		return fmt.Errorf("%w (the session lives, but no longer holds it)", errSessionEnded)
	case sessionEnded(conn):
		return fmt.Errorf("%w (%v)", errSessionEnded, err)
	case ctx.Err() != nil: // given up at the grace's end, or closed
		return fmt.Errorf("%w (given up: %v)", errSessionEnded, err)
	}
	return err
}

// minRetakeTry is the least time a try to take the lock again is given: a
// new session needs a connection set up, which a check interval shorter
// than that (tests check every 20 ms) would never let finish on a busy
// host, failing each try until the grace was over.
const minRetakeTry = 2 * time.Second

// retake takes the lock again on a new session, trying for a check
// interval at most (minRetakeTry at least). When the lock's previous session holds it still (its
// connection broke on this side, and PostgreSQL has not noticed yet), it
// ends that session, so that a later try may take it: the lock is this
// server's, and no other server can hold it meanwhile.
func (l *MarketLock) retake() error {
	ctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	bound := l.clock.After(max(l.check, minRetakeTry))
	type taken struct {
		conn *sql.Conn
		self backend
		err  error
	}
	res := make(chan taken, 1)
	go func() { // ends with ctx at the latest; waited for below
		conn, self, err := takePostgres(ctx, l.pool)
		var held *heldError
		if errors.As(err, &held) && held.by.is(l.session) {
			err = fmt.Errorf("its previous session (backend %d) holds it still: ended it", held.by.pid)
			if _, terr := l.pool.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, held.by.pid); terr != nil {
				err = fmt.Errorf("its previous session (backend %d) holds it still, and ending it failed: %w", held.by.pid, terr)
			}
		}
		res <- taken{conn, self, err}
	}()
	var t taken
	select {
	case t = <-res:
	case <-bound:
		cancel()
		t = <-res
	}
	if t.err != nil {
		return t.err
	}
	l.conn, l.session = t.conn, t.self
	return nil
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

// inDoubt puts the lock in doubt, if it was sure: placing waits (Hold).
func (l *MarketLock) inDoubt(why error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.held:
	default:
		return // in doubt already
	}
	l.held = make(chan struct{})
	close(l.doubt)
	l.why, l.since = why, l.clock.Now()
	l.log.Warn("market lock in doubt: placing waits until the database confirms it", "why", why.Error(), "grace", l.grace)
}

// sure ends the lock's doubt, if any; retaken says it was taken again on a
// new session, a new term.
func (l *MarketLock) sure(retaken bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if retaken {
		l.term++
	}
	select {
	case <-l.held:
		return
	default:
	}
	close(l.held)
	l.doubt = make(chan struct{})
	if retaken {
		l.log.Warn("market lock taken again on a new database session, no other server holding it: placing resumes, the engine rebuilt from the database", "term", l.term)
	} else {
		l.log.Info("market lock confirmed by its database session: placing resumes")
	}
}

// lose gives the lock up, closing its session in case it still holds it,
// and says why in Err.
func (l *MarketLock) lose(err error) {
	l.mu.Lock()
	select {
	case <-l.held:
		l.held = make(chan struct{})
		close(l.doubt)
	default:
	}
	l.mu.Unlock()
	l.err = err
	if l.conn != nil {
		discard(l.conn)
		l.conn = nil
	}
	close(l.lost)
}

// release lets the lock go on its session, if it still has one.
func (l *MarketLock) release() {
	if l.conn != nil {
		unlock(l.conn)
		l.conn = nil
	}
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

// Hold waits while the lock is in doubt, and returns its term: 1 for the
// session that first took it, one more each time it was taken again on a
// new session, after which the market in the database may have changed
// under the engine (another server may have held the lock meanwhile). It
// fails once the lock is lost or closed, or when ctx ends first. A SQLite
// lock is never in doubt.
func (l *MarketLock) Hold(ctx context.Context) (uint64, error) {
	for {
		l.mu.Lock()
		held, term := l.held, l.term
		l.mu.Unlock()
		select {
		case <-l.lost:
			return 0, fmt.Errorf("the market lock is lost: %w", l.err)
		default:
		}
		if l.ctx.Err() != nil {
			return 0, errMarketLockClosed
		}
		select {
		case <-held:
			return term, nil
		default:
		}
		select {
		case <-held: // sure again: read its term
		case <-l.lost:
		case <-l.ctx.Done():
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Doubt says why placing waits now: the lock is in doubt (since when, and
// why) or lost; nil while it is sure. The server's API and agents go on
// meanwhile, so it is a gauge for the operator (InDoubt), not a readiness
// failure.
func (l *MarketLock) Doubt() error {
	if err := l.Err(); err != nil {
		return fmt.Errorf("the market lock is lost: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.held:
		return nil
	default:
	}
	return fmt.Errorf("the market lock is in doubt since %s (%v): placing waits until the database confirms it", l.since.UTC().Format(time.RFC3339), l.why)
}

// InDoubt is idlegrid_market_lock_in_doubt, 1 while placing waits for the
// lock (Doubt), for the server's metrics.
func (l *MarketLock) InDoubt() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idlegrid_market_lock_in_doubt",
		Help: "1 while the market lock is in doubt or lost and placing waits (its database session stalled or ended); 0 while it is sure.",
	}, func() float64 {
		if l.Doubt() != nil {
			return 1
		}
		return 0
	})
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
	l.stop()
	if l.file != nil {
		return l.file.Release()
	}
	<-l.done
	if l.ownPool {
		return l.pool.Close()
	}
	return nil
}
