package httpapi

import (
	"net"
	"net/http"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Failed authentication is limited per client address, before the
// account's own limit can apply: a client that sends API keys (or node
// IDs, or join tokens) the server does not know costs a database read
// each, and is guessing or broken. Each address may fail
// failedAuthBurst times at once, and once a second after that; past it,
// its requests are refused with 429 before any lookup, until its bucket
// fills again. Requests that authenticate spend nothing. Behind a reverse
// proxy every client shares the proxy's address: the limit is high enough
// that only a flood of failures from it trips it.
const (
	failedAuthBurst = 50
	failedAuthRPS   = 1
)

// authFailures are the failed-authentication buckets, by client address.
type authFailures struct{ *accountLimits }

func newAuthFailures() authFailures {
	return authFailures{newAccountLimits(failedAuthRPS, failedAuthBurst)}
}

// refused returns a 429 when addr has no failure left to spend, or nil.
func (f authFailures) refused(addr string, now time.Time) error {
	f.mu.Lock()
	lim, ok := f.m[addr]
	f.mu.Unlock()
	if !ok {
		return nil
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return nil
	}
	wait := time.Duration((1 - tokens) / float64(f.rps) * float64(time.Second))
	err := idlegrid.Errorf(idlegrid.ETOOMANY, "too many requests from %s failed to authenticate; wait %s, and check the API key (or node ID, or join token) they send",
		addr, wait.Round(time.Second))
	err.RetryAfter = wait
	return err
}

// guard runs check, an authentication that reads the database, unless
// r's address has failed too often; a failed check counts against it.
func (a *api) guard(r *http.Request, check func() error) error {
	addr, now := clientAddr(r), a.srv.Now()
	if err := a.fails.refused(addr, now); err != nil {
		return err
	}
	err := check()
	if idlegrid.ErrorCode(err) == idlegrid.EUNAUTHORIZED {
		a.fails.take(addr, now)
	}
	return err
}

// clientAddr is the address r came from, without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
