package server

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// Defaults for Config.ScanShare and Config.ScanBurst.
const (
	DefaultScanShare = 0.2
	DefaultScanBurst = time.Second
)

// How long a market view, and a job's explanation, are answered again to
// whoever asks, before the engine is read anew.
const (
	marketViewTTL = 2 * time.Second
	explainTTL    = 5 * time.Second
)

// scanBudget bounds the scheduler's time spent on reads that scan the
// whole market for people: explain, the market view and a search for free
// GPUs. Each runs on the scheduler's goroutine and holds every placement
// back while it runs, and at 100,000 nodes an explain takes about 45 ms
// and the market view 75 ms, so that a few callers could otherwise stop
// placements altogether. A token bucket of microseconds of the
// scheduler's time (golang.org/x/time/rate) refills at share of the
// clock's time up to burst; a scan may start while the bucket is not
// empty, and is charged what it took. Placements, and the reads that look
// up a few nodes, never wait on it.
type scanBudget struct {
	lim   *rate.Limiter
	burst int // µs
}

func newScanBudget(share float64, burst time.Duration) *scanBudget {
	b := int(burst.Microseconds())
	return &scanBudget{lim: rate.NewLimiter(rate.Limit(share*1e6), b), burst: b}
}

// askScan runs f on the scheduler's goroutine, as ask does, when the
// budget has time left at now; what refuses it is ETOOMANY with the wait
// in RetryAfter.
func (s *Server) askScan(ctx context.Context, what string, f func(e *market.Engine)) error {
	b, now := s.scans, s.Now()
	if left := b.lim.TokensAt(now); left <= 0 {
		wait := time.Duration((1-left)/float64(b.lim.Limit())*1e6) * time.Microsecond
		err := idlegrid.Errorf(idlegrid.ETOOMANY, "the market is busy answering %s and other reads of every node; retry in %s", what, wait.Round(time.Millisecond))
		err.RetryAfter = wait
		return err
	}
	var took time.Duration
	err := s.ask(ctx, func(e *market.Engine) {
		start := time.Now() // the scheduler's own time, which the budget shares out
		f(e)
		took = time.Since(start)
	})
	b.lim.ReserveN(s.Now(), min(int(took.Microseconds())+1, b.burst))
	s.metrics.scans.Observe(took.Seconds())
	return err
}

// readCache answers a read of every node again to everyone who asks
// within its time to live: the market view (one key) however many
// dashboards show it, a job's explanation however often it is asked.
// Callers that find an entry stale together wait for one read
// (golang.org/x/sync/singleflight), each only as long as its own context
// lasts; the read goes on for the others.
type readCache[T any] struct {
	ttl   time.Duration
	group singleflight.Group
	mu    sync.Mutex
	m     map[string]cached[T]
}

type cached[T any] struct {
	at time.Time
	v  T
}

// maxCached is how many entries a readCache holds before it drops those
// past their time.
const maxCached = 1024

// get returns key's value read at most ttl before now, reading it anew
// with read when there is none. read gets a context that the callers'
// ends do not cancel.
func (c *readCache[T]) get(ctx context.Context, key string, now time.Time, read func(context.Context) (T, error)) (T, error) {
	if v, ok := c.fresh(key, now); ok {
		return v, nil
	}
	shared := context.WithoutCancel(ctx)
	ch := c.group.DoChan(key, func() (any, error) {
		// A caller that found the entry stale just as another read
		// ended starts a flight of its own: it takes that read's value.
		if v, ok := c.fresh(key, now); ok {
			return v, nil
		}
		v, err := read(shared)
		if err == nil {
			c.keep(key, now, v)
		}
		return v, err
	})
	select {
	case r := <-ch:
		v, _ := r.Val.(T)
		return v, r.Err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// fresh returns key's value if it was read less than ttl before now.
func (c *readCache[T]) fresh(key string, now time.Time) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || now.Sub(e.at) >= c.ttl || now.Before(e.at) {
		var zero T
		return zero, false
	}
	return e.v, true
}

// keep stores key's value as read at now.
func (c *readCache[T]) keep(key string, now time.Time, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.forgetOld(now)
	}
	c.m[key] = cached[T]{at: now, v: v}
}

// forgetOld drops the entries past their time.
func (c *readCache[T]) forgetOld(now time.Time) {
	if c.m == nil {
		c.m = map[string]cached[T]{}
	}
	for k, e := range c.m {
		if now.Sub(e.at) >= c.ttl || now.Before(e.at) {
			delete(c.m, k)
		}
	}
}
