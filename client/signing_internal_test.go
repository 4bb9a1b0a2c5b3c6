package client

import (
	"crypto/ed25519"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// Requests are signed at times of their own, a millisecond apart under a
// clock that stands still, and by the clock again once it is stepped back.
func TestAgentClient_signingTime(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	a := NewAgent("http://127.0.0.1:1", key)
	now := time.UnixMilli(1_000_000)
	a.now = func() time.Time { return now }
	signed := func() int64 {
		h := http.Header{}
		a.sign(h, "GET", "/v1/agent/commands", nil)
		ms, _ := strconv.ParseInt(h.Get(nodekey.HeaderTime), 10, 64)
		return ms
	}
	if got := []int64{signed(), signed(), signed()}; got[0] != 1_000_000 || got[1] != 1_000_001 || got[2] != 1_000_002 {
		t.Errorf("under a clock that stands still: %v, want a millisecond apart", got)
	}
	now = now.Add(-time.Hour) // NTP steps the clock back
	if got := signed(); got != now.UnixMilli() {
		t.Errorf("after the clock stepped back an hour: signed at %d, want the clock's %d", got, now.UnixMilli())
	}
}
