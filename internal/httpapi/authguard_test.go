package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
)

// An address that keeps failing to authenticate is refused 429, with
// Retry-After, even with a good key, until its failures refill; a request
// that authenticates spends nothing.
func TestAPI_authFailuresSlowed(t *testing.T) {
	gateway := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("{}")) })
	f := mustOpen(t, httpapi.Options{AuthFailuresPerMinute: 6, AuthFailureBurst: 3, Gateway: gateway})
	get := func(secret string) answer { return mustDo(t, request(t, http.MethodGet, f.URL+"/v1/jobs", secret, "")) }
	for range 5 {
		if a := get(f.AdminSecret); a.Status != http.StatusOK {
			t.Fatalf("a good key: %d %s", a.Status, a.Body)
		}
	}
	for i := range 3 {
		if a := get("sk_guess"); a.Status != http.StatusUnauthorized {
			t.Fatalf("bad key %d: %d %s, want 401", i+1, a.Status, a.Body)
		}
	}
	over := get(f.AdminSecret)
	if over.Status != http.StatusTooManyRequests || over.Err(t).Code != idlegrid.ETOOMANY {
		t.Fatalf("after 3 failures: %d %s, want 429 too_many", over.Status, over.Body)
	}
	if got := over.Header.Get("Retry-After"); got != "10" {
		t.Errorf("Retry-After = %q, want 10 (a failure every 10 s)", got)
	}
	if msg := over.Err(t).Message; !strings.Contains(msg, "127.0.0.1") || !strings.Contains(msg, "valid API key") {
		t.Errorf("message %q should name the address and say what to do", msg)
	}
	if a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/healthz", "", "")); a.Status != http.StatusOK {
		t.Errorf("a health check from the address: %d, want 200: it carries no key", a.Status)
	}
	if a := mustDo(t, request(t, http.MethodPost, f.URL+"/v1/chat/completions", f.AdminSecret, "{}")); a.Status != http.StatusTooManyRequests ||
		!strings.Contains(string(a.Body), `"type":"rate_limit_error"`) || a.Header.Get("Retry-After") != "10" {
		t.Errorf("the gateway's path: %d %s, want 429 in OpenAI's format, with Retry-After", a.Status, a.Body)
	}
	f.Clock.Advance(10 * time.Second)
	if a := get(f.AdminSecret); a.Status != http.StatusOK {
		t.Fatalf("after 10 s: %d %s, want 200", a.Status, a.Body)
	}
	if a := get("sk_guess"); a.Status != http.StatusUnauthorized {
		t.Fatalf("a failure refilled: %d, want 401", a.Status)
	}
	if a := get(f.AdminSecret); a.Status != http.StatusTooManyRequests {
		t.Errorf("the refilled failure spent: %d, want 429", a.Status)
	}
}
