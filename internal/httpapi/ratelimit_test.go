package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/ratelimit"
)

// Each account has its own bucket, whichever of its keys it uses; an
// account over it gets 429 with Retry-After until the bucket refills, and
// nobody else notices. Admins are not limited.
func TestAPI_accountRateLimit(t *testing.T) {
	f := mustOpen(t, httpapi.Options{AccountLimits: ratelimit.New(0.5, 3)})
	renter, acct, secret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	_, _, other := f.mustAccount(t, "ren2", idlegrid.RoleRenter)
	get := func(secret string) answer { return mustDo(t, request(t, http.MethodGet, f.URL+"/v1/jobs", secret, "")) }

	_, secondKey, err := renter.CreateAPIKey(context.Background(), "second") // the bucket's first token
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{secret, secondKey} {
		if a := get(s); a.Status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+2, a.Status, a.Body)
		}
	}
	over := get(secondKey)
	if over.Status != http.StatusTooManyRequests || over.Err(t).Code != idlegrid.ETOOMANY {
		t.Fatalf("over the burst: %d %s, want 429 too_many", over.Status, over.Body)
	}
	if got := over.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2 (a token every 2 s)", got)
	}
	if msg := over.Err(t).Message; !strings.Contains(msg, acct.ID) || !strings.Contains(msg, "retry") {
		t.Errorf("message %q should name the account and say to retry", msg)
	}
	if a := get(other); a.Status != http.StatusOK {
		t.Errorf("another renter: %d, want 200", a.Status)
	}
	for range 5 {
		if a := get(f.AdminSecret); a.Status != http.StatusOK {
			t.Fatalf("the admin: %d, want 200", a.Status)
		}
	}
	f.Clock.Advance(2 * time.Second)
	if a := get(secret); a.Status != http.StatusOK {
		t.Errorf("after 2 s: %d, want 200", a.Status)
	}
	if a := get(secret); a.Status != http.StatusTooManyRequests {
		t.Errorf("the refilled token spent: %d, want 429", a.Status)
	}
}
