// Package ratelimit keeps a token bucket per key (an account, an address)
// with golang.org/x/time/rate, and forgets the buckets of keys that went
// quiet, so that the map stays as small as the keys that are busy.
//
// The API limits each account's requests with one (internal/httpapi), and
// the inference gateway spends from the same account's bucket for its
// requests that run no model (internal/gateway): one renter's script
// cannot starve the others on either side.
package ratelimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/idlegrid/idlegrid"
)

// Buckets is a token bucket per key, all of one rate and burst. A nil or
// zero-rate Buckets limits nothing.
type Buckets struct {
	rps   rate.Limit // 0: no limit
	burst int

	mu    sync.Mutex
	m     map[string]*rate.Limiter
	sweep int // the map's size that makes the next sweep
}

// minSweep is the fewest keys a sweep looks at.
const minSweep = 1024

// New returns buckets of burst tokens refilled at rps a second; burst 0 is
// a second's worth (at least 1), and rps 0 no limit.
func New(rps float64, burst int) *Buckets {
	if burst <= 0 {
		burst = max(int(math.Ceil(rps)), 1)
	}
	return &Buckets{rps: rate.Limit(rps), burst: burst, m: map[string]*rate.Limiter{}, sweep: minSweep}
}

// Take spends one of key's tokens at now. When it has none left it
// returns how long until it has one.
func (l *Buckets) Take(key string, now time.Time) (time.Duration, bool) {
	if l == nil || l.rps <= 0 {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[key]
	if !ok {
		l.forgetIdle(now)
		lim = rate.NewLimiter(l.rps, l.burst)
		l.m[key] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// Wait says how long until key has a token, without spending one; ok when
// it has one now.
func (l *Buckets) Wait(key string, now time.Time) (time.Duration, bool) {
	if l == nil || l.rps <= 0 {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[key]
	if !ok || lim.TokensAt(now) >= 1 {
		return 0, true
	}
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return d, d <= 0
}

// forgetIdle drops, once the map has doubled since the last sweep, the
// keys whose buckets have filled again: a new bucket is the same.
func (l *Buckets) forgetIdle(now time.Time) {
	if len(l.m) < l.sweep {
		return
	}
	for k, lim := range l.m {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.m, k)
		}
	}
	l.sweep = max(2*len(l.m), minSweep)
}

// Admit spends a token of the caller's account at now, and refuses the
// request (ETOOMANY, with how long to wait) when it has none. Admins are
// not limited. Limits are per account, not per key, since an account may
// make as many keys as it likes.
func (l *Buckets) Admit(c *idlegrid.Caller, now time.Time) error {
	if c.Role == idlegrid.RoleAdmin {
		return nil
	}
	wait, ok := l.Take(c.AccountID, now)
	if ok {
		return nil
	}
	err := idlegrid.Errorf(idlegrid.ETOOMANY, "account %s is over the API's limit of %g requests a second (bursts of %d); wait %s and retry, and space out scripted requests",
		c.AccountID, float64(l.rps), l.burst, wait.Round(time.Millisecond))
	err.RetryAfter = wait
	return err
}
