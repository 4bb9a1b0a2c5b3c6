package httpapi

import (
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// Failures count by address, an IPv6 one by its /64; behind a trusted
// proxy, by the client X-Forwarded-For names, never by what an untrusted
// peer claims there.
func TestAuthGuard_clientAddr(t *testing.T) {
	g := newAuthGuard(6, 2, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	for _, tt := range []struct{ remote, xff, want string }{
		{"203.0.113.7:5123", "", "203.0.113.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "", "2001:db8:1:2::/64"},
		{"[::ffff:198.51.100.1]:80", "", "198.51.100.1"},
		{"@", "", "@"}, // a unix socket's peer
		{"203.0.113.7:1", "198.51.100.9", "203.0.113.7"},                // not a proxy: what it claims counts for nothing
		{"127.0.0.1:1", "198.51.100.9", "198.51.100.9"},                 // a proxy on loopback
		{"127.0.0.1:1", "", "127.0.0.1"},                                // a local client
		{"10.1.2.3:1", "198.51.100.9, 10.9.9.9", "198.51.100.9"},        // two trusted proxies
		{"10.1.2.3:1", "6.6.6.6, 198.51.100.9", "198.51.100.9"},         // a client that forged a hop
		{"127.0.0.1:1", "not-an-address, 198.51.100.9", "198.51.100.9"}, // garbage before the client
		{"127.0.0.1:1", "2001:db8:aa:bb::1", "2001:db8:aa:bb::/64"},     // an IPv6 client behind the proxy
		{"127.0.0.1:1", "198.51.100.9, not-an-address", "127.0.0.1"},    // garbage last: the proxy itself
	} {
		r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
		if tt.xff != "" {
			r.Header.Set("X-Forwarded-For", tt.xff)
		}
		if got := g.clientAddr(r); got != tt.want {
			t.Errorf("clientAddr(%q, X-Forwarded-For %q) = %q, want %q", tt.remote, tt.xff, got, tt.want)
		}
	}
}

// One address's failures do not refuse another's requests; requests that
// carry no secret (an agent's signed ones, health checks) are neither
// counted nor refused.
func TestAuthGuard_byAddress(t *testing.T) {
	g := newAuthGuard(6, 2, nil)
	now := time.Unix(1_800_000_000, 0)
	keyed := func(remote string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://x/v1/jobs", nil)
		r.RemoteAddr = remote
		r.Header.Set("Authorization", "Bearer sk_guess")
		return r
	}
	a, sameBlock, other := keyed("[2001:db8:1:2::1]:1"), keyed("[2001:db8:1:2::99]:2"), keyed("203.0.113.7:1")
	signed, _ := http.NewRequest(http.MethodPost, "http://x/v1/agent/heartbeat", nil)
	signed.RemoteAddr = "203.0.113.7:1"
	for range 2 {
		g.note(a, http.StatusUnauthorized, now)
		g.note(other, http.StatusOK, now)            // only 401s count
		g.note(signed, http.StatusUnauthorized, now) // and only of secrets
	}
	if err := g.admit(sameBlock, now); err == nil {
		t.Error("the same /64 after two failures: admitted, want refused")
	}
	if err := g.admit(other, now); err != nil {
		t.Errorf("another address: %v, want admitted", err)
	}
	g.note(other, http.StatusUnauthorized, now)
	g.note(other, http.StatusUnauthorized, now)
	if err := g.admit(signed, now); err != nil {
		t.Errorf("a signed agent request from an address out of failures: %v, want admitted", err)
	}
	join, _ := http.NewRequest(http.MethodPost, "http://x/v1/agent/join", nil)
	join.RemoteAddr = "203.0.113.7:9"
	if err := g.admit(join, now); err == nil {
		t.Error("a join from an address out of failures: admitted, want refused")
	}
	if err := g.admit(a, now.Add(10*time.Second)); err != nil {
		t.Errorf("10 s on: %v, want admitted", err)
	}
}
