package httpapi

import (
	"net/http"
	"testing"
	"time"
)

// Failures count by address, an IPv6 one by its /64, and one address's
// failures do not refuse another's requests.
func TestAuthGuard_byAddress(t *testing.T) {
	for _, tt := range []struct{ remote, want string }{
		{"203.0.113.7:5123", "203.0.113.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[::ffff:198.51.100.1]:80", "198.51.100.1"},
		{"@", "@"}, // a unix socket's peer
	} {
		if got := clientAddr(&http.Request{RemoteAddr: tt.remote}); got != tt.want {
			t.Errorf("clientAddr(%q) = %q, want %q", tt.remote, got, tt.want)
		}
	}
	g := newAuthGuard(6, 2)
	now := time.Unix(1_800_000_000, 0)
	a := &http.Request{RemoteAddr: "[2001:db8:1:2::1]:1"}
	sameBlock := &http.Request{RemoteAddr: "[2001:db8:1:2::99]:2"}
	other := &http.Request{RemoteAddr: "203.0.113.7:1"}
	for range 2 {
		g.note(a, http.StatusUnauthorized, now)
		g.note(other, http.StatusOK, now) // only 401s count
	}
	if err := g.admit(sameBlock, now); err == nil {
		t.Error("the same /64 after two failures: admitted, want refused")
	}
	if err := g.admit(other, now); err != nil {
		t.Errorf("another address: %v, want admitted", err)
	}
	if err := g.admit(a, now.Add(10*time.Second)); err != nil {
		t.Errorf("10 s on: %v, want admitted", err)
	}
}
