package httpapi

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/ratelimit"
)

// Defaults of Options.AuthFailuresPerMinute and AuthFailureBurst: an
// address may fail 30 times at once, then once every 10 seconds.
const (
	DefaultAuthFailuresPerMinute = 6
	DefaultAuthFailureBurst      = 30
)

// authGuard slows down an address that keeps failing to authenticate with
// a secret: an API key (a request with an Authorization header) or a join
// token (POST /v1/agent/join and its check). Each 401 answered to such a
// request spends one of its address's tokens, and while it has none every
// such request from it is refused 429, with Retry-After, before any secret
// is looked up. An honest client seldom fails twice running; a script
// guessing secrets, or flooding bad ones to load the database, is held to
// the refill rate. Agents' signed requests, health checks and the
// dashboard's files carry no secret: they are neither counted nor
// refused, so a node whose clock is off, or that the server forgot, never
// holds up its neighbours behind one NAT.
//
// An address is the peer's IP, an IPv6 one as its /64, the block one
// host is usually given; behind a trusted reverse proxy (loopback, and
// Options.TrustedProxies) it is the last address before the proxies in
// X-Forwarded-For.
type authGuard struct {
	failures *ratelimit.Buckets // by address
	trusted  []netip.Prefix
}

// loopback is always a trusted proxy: only this machine's processes
// connect from it, a reverse proxy in front of the server among them.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

func newAuthGuard(perMinute float64, burst int, trusted []netip.Prefix) *authGuard {
	return &authGuard{failures: ratelimit.New(perMinute/60, burst), trusted: append(append([]netip.Prefix(nil), loopback...), trusted...)}
}

// guarded reports whether r carries a secret the guard counts failures of.
func guarded(r *http.Request) bool {
	return r.Header.Get("Authorization") != "" || strings.HasPrefix(r.URL.Path, "/v1/agent/join")
}

// clientAddr is the address r's failures count against.
func (g *authGuard) clientAddr(r *http.Request) string {
	ip, ok := peerIP(r)
	if !ok {
		return r.RemoteAddr
	}
	if g.trusts(ip) {
		ip = g.forwardedFor(r, ip)
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// peerIP is the IP r came from.
func peerIP(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	return ip.Unmap(), err == nil
}

// forwardedFor is the client a trusted proxy at peer says r came from: the
// last address in X-Forwarded-For that is not a trusted proxy's, walking
// back from peer; peer when there is none.
func (g *authGuard) forwardedFor(r *http.Request, peer netip.Addr) netip.Addr {
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	ip := peer
	for i := len(hops) - 1; i >= 0 && g.trusts(ip); i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // not an address: trust nothing before it
		}
		ip = a.Unmap()
	}
	return ip
}

func (g *authGuard) trusts(ip netip.Addr) bool {
	for _, p := range g.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// admit refuses r while its address has no failures left to spend.
func (g *authGuard) admit(r *http.Request, now time.Time) error {
	if !guarded(r) {
		return nil
	}
	addr := g.clientAddr(r)
	wait, ok := g.failures.Wait(addr, now)
	if ok {
		return nil
	}
	err := idlegrid.Errorf(idlegrid.ETOOMANY, "too many failed authentications from %s (everyone there shares this limit); wait %s, then retry with a valid API key (idlegrid key ls lists yours) or join token",
		addr, wait.Round(time.Second))
	err.RetryAfter = wait
	return err
}

// note spends a token of r's address when r was answered 401.
func (g *authGuard) note(r *http.Request, status int, now time.Time) {
	if status == http.StatusUnauthorized && guarded(r) {
		g.failures.Take(g.clientAddr(r), now)
	}
}

// refuseOpenAI answers err, the guard's refusal, in OpenAI's error format,
// as the gateway answers its own errors.
func refuseOpenAI(w http.ResponseWriter, err error) {
	b, _ := json.Marshal(gateway.ErrorBody(err))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Retry-After", idlegrid.RetryAfterSeconds(err))
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(append(b, '\n'))
}
