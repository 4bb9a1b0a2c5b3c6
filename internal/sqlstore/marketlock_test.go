package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// TestMarketLock_stall: on PostgreSQL, a check of the market lock that
// stalls (the network holding back what the server sends) puts the lock
// in doubt once a check interval has passed, which holds placing up
// (Hold), and is waited out on the same session, which keeps the lock all
// along: the lock is sure again, in the same term, when the answer comes.
// A check that stalls past the grace gives its session up, and the lock,
// which no new session can take either, is lost, saying the database did
// not confirm it.
func TestMarketLock_stall(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	ctx := context.Background()
	p := mustStallProxy(t, dsn)
	first, second := mustOpen(t, p.dsn), mustOpen(t, dsn)
	clock := &stepClock{now: t0}
	held, err := sqlstore.LockMarketWith(ctx, first, sqlstore.MarketLockConfig{Check: time.Minute, Grace: 3 * time.Minute, Clock: clock})
	mustOK(t, err)
	defer held.Close()

	p.hold()
	checked := make(chan struct{})
	go func() { sqlstore.CheckMarketLock(held); close(checked) }()
	<-p.held // the check's query waits in the network
	// A check interval on, short of the grace, the lock is in doubt.
	stepUntil(t, clock, sqlstore.MarketLockInDoubt(held), 10*time.Second, 2*time.Minute)
	if _, err := held.Hold(cancelled()); !errors.Is(err, context.Canceled) {
		t.Errorf("Hold while the lock is in doubt: %v, want it to wait (and its context to end)", err)
	}
	if _, err := second.LockMarket(ctx, 0); !errors.Is(err, sqlstore.ErrMarketLocked) {
		t.Fatalf("a lock taken while the first's check stalls: %v, want ErrMarketLocked", err)
	}
	p.release()
	<-checked
	if term, err := held.Hold(ctx); term != 1 || err != nil {
		t.Errorf("Hold after the stall = %d, %v; want term 1, its first session's", term, err)
	}
	select {
	case <-held.Lost():
		t.Fatalf("a lock whose check stalled a while is lost: %v", held.Err())
	default:
	}
	if _, err := second.LockMarket(ctx, 0); !errors.Is(err, sqlstore.ErrMarketLocked) {
		t.Fatalf("a lock taken after the stall: %v, want ErrMarketLocked", err)
	}

	p.hold()
	defer p.release()
	go sqlstore.CheckMarketLock(held)
	<-p.held
	// The grace: the session is given up, and a new one tried, which waits
	// in the network too, until its try's bound.
	stepUntil(t, clock, held.Lost(), time.Minute, 10*time.Minute)
	if err := held.Err(); err == nil || !strings.Contains(err.Error(), "the database has not confirmed it for 3m0s") {
		t.Errorf("the lost lock's Err = %v, want it to say the database did not confirm it", err)
	}
	if _, err := held.Hold(ctx); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Errorf("Hold once the lock is lost: %v, want it to say so", err)
	}
}

// TestMarketLock_sessionEnded: on PostgreSQL, a lock whose session ended
// (its connection broke, its backend was terminated) is taken again on a
// new session at the next check when no other server took it meanwhile:
// the server runs the market on, and a second server is still refused.
// When another server took it first, the lock is lost, saying so.
func TestMarketLock_sessionEnded(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	ctx := context.Background()
	first, second := mustOpen(t, dsn), mustOpen(t, dsn)
	held, err := first.LockMarket(ctx, time.Hour)
	mustOK(t, err)
	defer held.Close()
	mustOK(t, sqlstore.KillMarketLock(ctx, second))
	sqlstore.CheckMarketLock(held)
	select {
	case <-held.Lost():
		t.Fatalf("a lock whose session ended, and which no other server took, is lost: %v", held.Err())
	default:
	}
	if _, err := second.LockMarket(ctx, 0); !errors.Is(err, sqlstore.ErrMarketLocked) {
		t.Fatalf("a second lock once the first was taken again: %v, want ErrMarketLocked", err)
	}

	mustOK(t, sqlstore.KillMarketLock(ctx, second))
	taken, err := second.LockMarket(ctx, time.Hour)
	mustOK(t, err)
	defer taken.Close()
	sqlstore.CheckMarketLock(held)
	select {
	case <-held.Lost():
		if err := held.Err(); !errors.Is(err, sqlstore.ErrMarketLocked) || !strings.Contains(err.Error(), "session that held it ended") {
			t.Errorf("the lost lock's Err = %v, want ErrMarketLocked saying its session ended", err)
		}
	default:
		t.Fatal("a lock that another server took is not lost")
	}
}

// TestMarketLock_deadHostLetGo: the lock's session has PostgreSQL probe
// its connection, so that a server whose host died without hanging up
// lets the lock go in about a minute rather than the system's two hours;
// and it names itself for an operator reading pg_stat_activity.
func TestMarketLock_deadHostLetGo(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	ctx := context.Background()
	db, other := mustOpen(t, dsn), mustOpen(t, dsn)
	held, err := db.LockMarket(ctx, time.Hour)
	mustOK(t, err)
	defer held.Close()
	for name, want := range map[string]string{"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3"} {
		if got, err := sqlstore.MarketLockSetting(ctx, held, name); err != nil || (got != want && got != "0") {
			t.Errorf("%s = %q, %v; want %s (0 over a local socket, where keepalives do not apply)", name, got, err, want)
		}
	}
	app, err := sqlstore.MarketLockHolderName(ctx, other)
	mustOK(t, err)
	if app != "idlegrid market lock" {
		t.Errorf("the lock's session is named %q in pg_stat_activity, want %q", app, "idlegrid market lock")
	}
}

// TestMarketLock_takenAgainTerm: each time a lock is taken again on a new
// session its term grows, which Hold reports.
func TestMarketLock_takenAgainTerm(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	ctx := context.Background()
	first, other := mustOpen(t, dsn), mustOpen(t, dsn)
	held, err := first.LockMarket(ctx, time.Hour)
	mustOK(t, err)
	defer held.Close()
	for want := uint64(1); want <= 3; want++ {
		if term, err := held.Hold(ctx); term != want || err != nil {
			t.Fatalf("Hold = %d, %v; want term %d", term, err, want)
		}
		mustOK(t, sqlstore.KillMarketLock(ctx, other))
		sqlstore.CheckMarketLock(held)
	}
}

// TestOpenLocked_beforeMigrating: a server refused the market lock by the
// one running the market leaves the database as it found it: it takes the
// lock before it migrates. Once the lock is free, it opens and migrates.
func TestOpenLocked_beforeMigrating(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	ctx := context.Background()
	raw, err := sql.Open("pgx", dsn)
	mustOK(t, err)
	defer raw.Close()
	conn, err := raw.Conn(ctx) // the session of the server running the market
	mustOK(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, sqlstore.MarketLockKey)
	mustOK(t, err)

	if _, _, err := sqlstore.OpenLocked(ctx, dsn, sqlstore.MarketLockConfig{}); !errors.Is(err, sqlstore.ErrMarketLocked) {
		t.Fatalf("OpenLocked while another holds the lock: %v, want ErrMarketLocked", err)
	}
	var migrated bool
	mustOK(t, raw.QueryRowContext(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&migrated))
	if migrated {
		t.Error("a server refused the market lock migrated the database first")
	}
	_, err = conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, sqlstore.MarketLockKey)
	mustOK(t, err)
	db, lock, err := sqlstore.OpenLocked(ctx, dsn, sqlstore.MarketLockConfig{})
	mustOK(t, err)
	mustOK(t, lock.Close())
	mustOK(t, db.Close())
}

// TestGuardedDB_PlaceJobs: the engine's placements wait while the market
// lock is in doubt, and are refused once it is lost; the first after the
// lock was taken again on a new session is refused as a conflict that has
// the engine rebuild (another server may have placed meanwhile), and the
// next is placed.
func TestGuardedDB_PlaceJobs(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	ctx := context.Background()
	p := mustStallProxy(t, dsn)
	store, viaProxy, other := mustOpen(t, dsn), mustOpen(t, p.dsn), mustOpen(t, dsn)
	clock := &stepClock{now: t0}
	lock, err := sqlstore.LockMarketWith(ctx, viaProxy, sqlstore.MarketLockConfig{Check: time.Minute, Grace: 3 * time.Minute, Clock: clock})
	mustOK(t, err)
	defer lock.Close()
	g := lock.Guard(store)

	renter := mustAccount(t, store, idlegrid.RoleRenter)
	mustTopUp(t, store, renter.ID, 100*idlegrid.MicrosPerUnit)
	provider := mustAccount(t, store, idlegrid.RoleProvider)
	n := mustNode(t, store, provider.ID, 4)
	place := func(ctx context.Context, j *idlegrid.Job, gpu int) error {
		return g.PlaceJobs(ctx, []*idlegrid.Placement{placement(j, 0, lease(j, n, gpu))})[0]
	}
	queued := func(j *idlegrid.Job) {
		t.Helper()
		got, err := store.FindJob(ctx, j.ID)
		mustOK(t, err)
		if got.State != idlegrid.JobQueued {
			t.Errorf("job %s is %s, want it still queued", j.ID, got.State)
		}
	}
	j1, j2, j3, j4 := mustJob(t, store, renter.ID, 1, 1), mustJob(t, store, renter.ID, 1, 1), mustJob(t, store, renter.ID, 1, 1), mustJob(t, store, renter.ID, 1, 1)
	mustOK(t, place(ctx, j1, 0))

	p.hold()
	checked := make(chan struct{})
	go func() { sqlstore.CheckMarketLock(lock); close(checked) }()
	<-p.held
	stepUntil(t, clock, sqlstore.MarketLockInDoubt(lock), 10*time.Second, 2*time.Minute)
	wantCode(t, place(cancelled(), j2, 1), idlegrid.EUNAVAILABLE)
	queued(j2)
	if err := lock.Doubt(); err == nil || !strings.Contains(err.Error(), "in doubt since") {
		t.Errorf("Doubt while the lock is in doubt: %v, want it to say since when", err)
	}
	p.release()
	<-checked
	mustOK(t, lock.Doubt())
	mustOK(t, place(ctx, j2, 1)) // the same session: nothing changed meanwhile

	mustOK(t, sqlstore.KillMarketLock(ctx, other))
	sqlstore.CheckMarketLock(lock)
	err = place(ctx, j3, 2)
	wantCode(t, err, idlegrid.ECONFLICT)
	if idlegrid.JobMovedOn(err) {
		t.Errorf("the placement after the lock was taken again: %v, a job that moved on; want a conflict that rebuilds the engine", err)
	}
	queued(j3)
	mustOK(t, place(ctx, j3, 2))

	mustOK(t, sqlstore.KillMarketLock(ctx, other))
	taken, err := other.LockMarket(ctx, time.Hour)
	mustOK(t, err)
	defer taken.Close()
	sqlstore.CheckMarketLock(lock)
	wantCode(t, place(ctx, j4, 3), idlegrid.EUNAVAILABLE)
	queued(j4)
	if err := lock.Doubt(); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Errorf("Doubt once the lock is lost: %v, want it to say so", err)
	}
}

// cancelled is a context that has ended.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// stepClock is a sqlstore.LockClock that moves only when the test steps
// it.
type stepClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []stepTimer
}

type stepTimer struct {
	at time.Time
	c  chan time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, stepTimer{c.now.Add(d), ch})
	return ch
}

// stepUntil steps clock by d every few milliseconds until done is
// closed, failing t past limit of the clock's time: a timer the lock sets
// only after the proxy said it held a write back (which may have been
// another write's) still fires.
func stepUntil(t *testing.T, clock *stepClock, done <-chan struct{}, d, limit time.Duration) {
	t.Helper()
	for stepped := time.Duration(0); ; stepped += d {
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond):
		}
		if stepped >= limit {
			t.Fatalf("not done after %s of the lock's clock", limit)
		}
		clock.step(d)
	}
}

// step moves the clock d on, firing the timers due.
func (c *stepClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
		} else {
			tm.c <- c.now
		}
	}
	c.timers = kept
}

// stallProxy forwards connections to PostgreSQL, and holds back what the
// client sends while hold is on: a network that stalls.
type stallProxy struct {
	dsn  string        // the database's URL through the proxy
	held chan struct{} // gets a value when a write is held back
	mu   sync.Mutex
	gate chan struct{} // closed while writes flow
}

func mustStallProxy(t *testing.T, dsn string) *stallProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	mustOK(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustOK(t, err)
	p := &stallProxy{held: make(chan struct{}, 1), gate: make(chan struct{})}
	close(p.gate)
	target := u.Host
	u.Host = ln.Addr().String()
	p.dsn = u.String()
	var wg sync.WaitGroup
	var conns []net.Conn
	var connsMu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		p.release()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			connsMu.Lock()
			conns = append(conns, client, server)
			connsMu.Unlock()
			wg.Go(func() { p.forward(server, client); server.Close() })
			wg.Go(func() { io.Copy(client, server); client.Close() })
		}
	})
	return p
}

// forward copies from client to server, each write once the gate is open.
func (p *stallProxy) forward(server, client net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			p.wait()
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) wait() {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	select {
	case <-gate:
		return
	default:
	}
	select {
	case p.held <- struct{}{}:
	default:
	}
	<-gate
}

// hold stalls the writes from now on; release lets them flow again.
func (p *stallProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

func (p *stallProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// TestOpen_together: two servers starting together on one fresh
// PostgreSQL database migrate it one after the other (goose's own advisory
// lock), before either takes the market lock: both open it.
func TestOpen_together(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			db, err := sqlstore.Open(context.Background(), dsn)
			if err == nil {
				err = db.Close()
			}
			errs <- err
		}()
	}
	mustOK(t, <-errs)
	mustOK(t, <-errs)
}
