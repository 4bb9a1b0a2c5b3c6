package httpapi

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// Defaults of Options.AuthFailuresPerMinute and AuthFailureBurst: an
// address may fail 30 times at once, then once every 10 seconds.
const (
	DefaultAuthFailuresPerMinute = 6
	DefaultAuthFailureBurst      = 30
)

// authGuard slows down an address that keeps failing to authenticate, by
// API key, join token or node signature: each 401 answered to it spends
// one of its tokens, and while it has none every request from it is
// refused 429, with Retry-After, before any key is looked up. An honest
// client seldom fails twice running; a script guessing keys, or flooding
// bad ones to load the database, is held to the refill rate. IPv6
// addresses count by /64, the block one host is usually given.
type authGuard struct {
	failures *accountLimits // by address
}

func newAuthGuard(perMinute float64, burst int) *authGuard {
	return &authGuard{failures: newAccountLimits(perMinute/60, burst)}
}

// clientAddr is the address r's failures count against: its peer's IP, an
// IPv6 one as its /64.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if ip = ip.Unmap(); ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// admit refuses r while its address has no failures left to spend.
func (g *authGuard) admit(r *http.Request, now time.Time) error {
	addr := clientAddr(r)
	wait, ok := g.failures.wait(addr, now)
	if ok {
		return nil
	}
	err := idlegrid.Errorf(idlegrid.ETOOMANY, "too many failed authentications from %s; wait %s, then retry with a valid API key (idlegrid key ls lists yours) or a fresh join token",
		addr, wait.Round(time.Second))
	err.RetryAfter = wait
	return err
}

// note spends a token of r's address when r was answered 401.
func (g *authGuard) note(r *http.Request, status int, now time.Time) {
	if status == http.StatusUnauthorized {
		g.failures.take(clientAddr(r), now)
	}
}

// refuseOpenAI answers err, the guard's refusal, in OpenAI's error format,
// as the gateway answers its own errors.
func refuseOpenAI(w http.ResponseWriter, err error) {
	code := idlegrid.ErrorCode(err)
	b, _ := json.Marshal(openai.ErrorBody{Error: openai.ErrorDetail{Message: idlegrid.ErrorMessage(err), Type: openai.TypeRateLimit, Code: &code}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Retry-After", idlegrid.RetryAfterSeconds(err))
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(append(b, '\n'))
}
