package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/httpapi"
)

// TestAPI_failedAuthLimit: an address whose requests keep failing to
// authenticate is refused with 429 before any lookup, until its bucket
// fills again; requests that authenticate spend nothing.
func TestAPI_failedAuthLimit(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	for i := range 200 { // many good requests first: they spend nothing
		if a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/me", f.AdminSecret, "")); a.Status != http.StatusOK {
			t.Fatalf("good request %d: status %d", i, a.Status)
		}
	}
	for i := range 50 {
		if a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/me", "igk_guessed", "")); a.Status != http.StatusUnauthorized {
			t.Fatalf("bad key %d: status %d, want 401", i, a.Status)
		}
	}
	a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/me", "igk_guessed", ""))
	if a.Status != http.StatusTooManyRequests || a.Header.Get("Retry-After") == "" || !strings.Contains(string(a.Body), "failed to authenticate") {
		t.Fatalf("the 51st bad key: status %d, Retry-After %q, %s; want 429 saying why and when to retry", a.Status, a.Header.Get("Retry-After"), a.Body)
	}
	f.Clock.Advance(2 * time.Second)
	if a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/me", f.AdminSecret, "")); a.Status != http.StatusOK {
		t.Errorf("a good key once the address has a failure to spend again: status %d, want 200", a.Status)
	}
}
