package httpapi

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/idlegrid/idlegrid"
)

// accountLimits rate-limit each account's API requests with a token bucket
// (golang.org/x/time/rate), so that one renter's or provider's script
// cannot starve the others or the scheduler it asks. Limits are per
// account, not per key, since an account may make as many keys as it
// likes. Admins are not limited, nor are agents (they sign as their
// nodes, outside withKey), nor the inference gateway, which has its own
// limits per key.
type accountLimits struct {
	rps   rate.Limit // 0: no limit
	burst int

	mu    sync.Mutex
	m     map[string]*rate.Limiter
	sweep int // the map's size that makes the next sweep
}

// minSweep is the fewest accounts a sweep looks at.
const minSweep = 1024

func newAccountLimits(rps float64, burst int) *accountLimits {
	if burst <= 0 {
		burst = max(int(math.Ceil(rps)), 1) // a second's worth
	}
	return &accountLimits{rps: rate.Limit(rps), burst: burst, m: map[string]*rate.Limiter{}, sweep: minSweep}
}

// take spends one of the account's tokens at now. When it has none left it
// returns how long until it has one.
func (l *accountLimits) take(account string, now time.Time) (time.Duration, bool) {
	if l.rps <= 0 {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[account]
	if !ok {
		l.forgetIdle(now)
		lim = rate.NewLimiter(l.rps, l.burst)
		l.m[account] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// wait says how long until key has a token, without spending one; ok when
// it has one now.
func (l *accountLimits) wait(key string, now time.Time) (time.Duration, bool) {
	if l.rps <= 0 {
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
// accounts whose buckets have filled again: a new bucket is the same.
func (l *accountLimits) forgetIdle(now time.Time) {
	if len(l.m) < l.sweep {
		return
	}
	for a, lim := range l.m {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.m, a)
		}
	}
	l.sweep = max(2*len(l.m), minSweep)
}

// limit refuses caller's request (429, with Retry-After) when its account
// is over its rate.
func (a *api) limit(caller *idlegrid.Caller) error {
	if caller.Role == idlegrid.RoleAdmin {
		return nil
	}
	wait, ok := a.limits.take(caller.AccountID, a.srv.Now())
	if ok {
		return nil
	}
	err := idlegrid.Errorf(idlegrid.ETOOMANY, "account %s is over the API's limit of %g requests a second (bursts of %d); wait %s and retry, and space out scripted requests",
		caller.AccountID, float64(a.limits.rps), a.limits.burst, wait.Round(time.Millisecond))
	err.RetryAfter = wait
	return err
}
