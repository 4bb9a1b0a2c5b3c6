package sqlstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// TestMarketLock_stall: on PostgreSQL, a check of the market lock that
// stalls (the network holding back what the server sends) is waited out
// on the same session, which keeps the lock all along; one that stalls
// past its bound, three check intervals, loses the lock.
func TestMarketLock_stall(t *testing.T) {
	dsn := pgtest.NewDSN(t) // skips without IDLEGRID_TEST_POSTGRES
	ctx := context.Background()
	p := mustStallProxy(t, dsn)
	first, second := mustOpen(t, p.dsn), mustOpen(t, dsn)

	held, err := first.LockMarket(ctx, time.Hour)
	mustOK(t, err)
	defer held.Close()
	p.hold()
	checked := make(chan struct{})
	go func() { sqlstore.CheckMarketLock(held); close(checked) }()
	<-p.held // the check's query waits in the network
	if _, err := second.LockMarket(ctx, 0); !errors.Is(err, sqlstore.ErrMarketLocked) {
		t.Fatalf("a lock taken while the first's check stalls: %v, want ErrMarketLocked", err)
	}
	p.release()
	<-checked
	select {
	case <-held.Lost():
		t.Fatalf("a lock whose check stalled a while is lost: %v", held.Err())
	default:
	}
	if _, err := second.LockMarket(ctx, 0); !errors.Is(err, sqlstore.ErrMarketLocked) {
		t.Fatalf("a lock taken after the stall: %v, want ErrMarketLocked", err)
	}
	mustOK(t, held.Close())

	// Checked every 20ms, a lock is lost once no check succeeded for 60ms.
	held, err = first.LockMarket(ctx, 20*time.Millisecond)
	mustOK(t, err)
	defer held.Close()
	p.hold()
	defer p.release()
	select {
	case <-held.Lost():
		if err := held.Err(); err == nil || !strings.Contains(err.Error(), "no check of it succeeded for 60ms") {
			t.Errorf("the lost lock's Err = %v, want it to say no check succeeded", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a lock whose checks stall on is never lost")
	}
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
