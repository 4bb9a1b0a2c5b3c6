package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
)

// TestBodies_refuseWhatTheyDoNotTake: a body is read as the route takes it,
// and what it does not take is refused, naming the field, rather than left
// out unread while the request goes through as if it had not been sent.
func TestBodies_refuseWhatTheyDoNotTake(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	_, provider, providerSecret := f.mustAccount(t, "p", idlegrid.RoleProvider)

	// A release is of the caller's own bond: it names no provider.
	req := request(t, http.MethodPost, f.URL+"/v1/bonds/release", providerSecret, `{"amount_micros":1000,"provider_id":"`+provider.ID+`"}`)
	req.Header.Set("Idempotency-Key", "release-1")
	if a := mustDo(t, req); a.Status != http.StatusBadRequest || a.Err(t).Field != "provider_id" || !strings.Contains(a.Err(t).Message, "unknown field") {
		t.Errorf("a release naming a provider: %d %s, want 400 naming provider_id as an unknown field", a.Status, a.Body)
	}

	// What the market sets of a dispute is not the operator's to send: a
	// dispute asked to open upheld, with a penalty, is refused, not opened
	// open with them left out.
	for field, value := range map[string]string{"state": `"upheld"`, "penalty_micros": `5000000`, "refund_micros": `1`, "id": `"dispute_mine"`,
		"resolution": `"done"`, "created_at": `"2001-01-02T03:04:05Z"`} {
		body := `{"offence":"fake_hardware","provider_id":"` + provider.ID + `","harm_micros":0,"evidence":"x","` + field + `":` + value + `}`
		a := mustDo(t, request(t, http.MethodPost, f.URL+"/v1/disputes", f.AdminSecret, body))
		if a.Status != http.StatusBadRequest || a.Err(t).Field != "dispute."+field {
			t.Errorf("a dispute sent with %s: %d %s, want 400 naming dispute.%s", field, a.Status, a.Body, field)
		}
	}
	if ds, err := f.Admin.ListDisputes(ctx, idlegrid.DisputeFilter{}); err != nil || len(ds) != 0 {
		t.Fatalf("disputes after the refusals: %v, %v; want none", ds, err)
	}
	// The Go client sends a whole Dispute, those fields' zero values in it.
	if d, err := f.Admin.OpenDispute(ctx, idlegrid.Dispute{Offence: "fake_hardware", ProviderID: provider.ID, Evidence: "x"}); err != nil || d.State != idlegrid.DisputeOpen {
		t.Errorf("client.OpenDispute: %v, %v; want an open dispute", d, err)
	}
}

// TestBodies_routesThatTakeNone: a route that takes no body (a cancel, a
// drain, a DELETE) takes none or {}, and refuses one that says something,
// naming the field, without doing what was asked.
func TestBodies_routesThatTakeNone(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, _, renterSecret := f.mustAccount(t, "r", idlegrid.RoleRenter)
	job, err := renter.SubmitJob(ctx, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	cancel := f.URL + "/v1/jobs/" + job.ID + "/cancel"
	if a := mustDo(t, request(t, "POST", cancel, renterSecret, `{"reason":"found a bug"}`)); a.Status != http.StatusBadRequest || a.Err(t).Field != "reason" {
		t.Errorf("a cancel with a reason: %d %s, want 400 naming reason", a.Status, a.Body)
	}
	if a := mustDo(t, request(t, "POST", cancel, renterSecret, `[]`)); a.Status != http.StatusBadRequest {
		t.Errorf("a cancel with an array: %d %s, want 400", a.Status, a.Body)
	}
	if j, err := renter.FindJob(ctx, job.ID); err != nil || j.State != idlegrid.JobQueued {
		t.Fatalf("the job after the refused cancels: %v, %v; want it queued", j, err)
	}
	if a := mustDo(t, request(t, "POST", cancel, renterSecret, `{}`)); a.Status != http.StatusOK {
		t.Errorf("a cancel with {}: %d %s, want 200", a.Status, a.Body)
	}
	if j, err := renter.FindJob(ctx, job.ID); err != nil || j.State != idlegrid.JobCancelled {
		t.Errorf("the job after a cancel with {}: %v, %v; want it cancelled", j, err)
	}
	key, _, err := renter.CreateAPIKey(ctx, "spare")
	if err != nil {
		t.Fatal(err)
	}
	if a := mustDo(t, request(t, "DELETE", f.URL+"/v1/keys/"+key.ID, renterSecret, `{"account_id":"x"}`)); a.Status != http.StatusBadRequest || a.Err(t).Field != "account_id" {
		t.Errorf("a revoke with a body: %d %s, want 400 naming account_id", a.Status, a.Body)
	}
	if a := mustDo(t, request(t, "DELETE", f.URL+"/v1/keys/"+key.ID, renterSecret, "")); a.Status != http.StatusNoContent {
		t.Errorf("a revoke without a body: %d %s, want 204", a.Status, a.Body)
	}
	// An admin's challenge sends {}, as client.ChallengeNode does: an
	// unknown node is then the only fault.
	if _, err := f.Admin.ChallengeNode(ctx, "node_nope"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("client.ChallengeNode of an unknown node: %v, want not_found", err)
	}
}

// TestQueryAndRangeMessages: a refusal says what the value must be, and
// what was sent, in the words the other parameters' refusals use.
func TestQueryAndRangeMessages(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	_, _, providerSecret := f.mustAccount(t, "p", idlegrid.RoleProvider)
	_, _, renterSecret := f.mustAccount(t, "r", idlegrid.RoleRenter)
	tests := []struct {
		name, secret, method, path, body string
		wantField, wantText              string
	}{
		{"a join token's lifetime past what a duration holds", providerSecret, "POST", "/v1/join-tokens",
			`{"name":"t","ttl_seconds":99999999999999}`, "join_token.ttl_seconds", "must be between 60 seconds and 30 days (0: a day), got 99999999999999"},
		{"a negative lifetime", providerSecret, "POST", "/v1/join-tokens",
			`{"name":"t","ttl_seconds":-5}`, "join_token.ttl_seconds", "must be between 60 seconds and 30 days (0: a day), got -5"},
		{"a quarantine state", providerSecret, "GET", "/v1/quarantine?state=lifted", "", "state", `must be active or all, got "lifted"`},
		{"a node sort", renterSecret, "GET", "/v1/nodes?sort=name", "", "sort", `must be oldest, price or reliability, got "name"`},
	}
	for _, tt := range tests {
		a := mustDo(t, request(t, tt.method, f.URL+tt.path, tt.secret, tt.body))
		if a.Status != http.StatusBadRequest || a.Err(t).Field != tt.wantField || !strings.Contains(a.Err(t).Message, tt.wantText) {
			t.Errorf("%s: %d %s, want 400 naming %s, saying %q", tt.name, a.Status, a.Body, tt.wantField, tt.wantText)
		}
	}
}

// TestUncleanPaths: a path under /v1 with an empty, "." or ".." segment
// (an ID a client left out) is the API's 404 in its own error body, not
// http.ServeMux's redirect to another route; a malformed query string is
// a 400 naming the query.
func TestUncleanPaths(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	_, _, renterSecret := f.mustAccount(t, "r", idlegrid.RoleRenter)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/v1/jobs//cancel", "/v1//jobs", "/v1/jobs/./x", "/v1/jobs/x/../y"} {
		req := request(t, "POST", f.URL+p, renterSecret, "")
		req.URL.Opaque = p // as sent, not cleaned by the client
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
			!strings.Contains(string(body), "empty, . or ..") || strings.Contains(string(body), "no such endpoint") {
			// "no such endpoint" is how the CLI and the dashboard tell an older server.
			t.Errorf("POST %s: %d %s %s, want the API's 404 saying the path has an empty segment", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if a := mustDo(t, request(t, "GET", f.URL+"/v1/jobs/", renterSecret, "")); a.Status != http.StatusNotFound {
		t.Errorf("GET /v1/jobs/: %d %s, want 404", a.Status, a.Body)
	}
	if a := mustDo(t, request(t, "GET", f.URL+"/v1/jobs?limit=%zz", renterSecret, "")); a.Status != http.StatusBadRequest || a.Err(t).Field != "query" {
		t.Errorf("a malformed query: %d %s, want 400 naming query", a.Status, a.Body)
	}
}

// TestKeyRouting_noneHasNoTime: a key without routing answers an empty
// routing and no updated_at, not the zero time; one with routing says
// when it was set, and the Go client reads both as before.
func TestKeyRouting_noneHasNoTime(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, _, renterSecret := f.mustAccount(t, "r", idlegrid.RoleRenter)
	key, _, err := renter.CreateAPIKey(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	url := f.URL + "/v1/keys/" + key.ID + "/routing"
	if a := mustDo(t, request(t, "GET", url, renterSecret, "")); a.Status != http.StatusOK || strings.Contains(string(a.Body), "updated_at") {
		t.Errorf("a key without routing: %d %s, want 200 without updated_at", a.Status, a.Body)
	}
	if a := mustDo(t, request(t, "PUT", url, renterSecret, `{"region":["eu-west"]}`)); a.Status != http.StatusOK || !strings.Contains(string(a.Body), `"updated_at":"`) {
		t.Errorf("a key's routing set: %d %s, want 200 with updated_at", a.Status, a.Body)
	}
	if kr, err := renter.KeyRouting(ctx, key.ID); err != nil || kr.UpdatedAt.IsZero() || kr.KeyID != key.ID || len(kr.Routing.Region) != 1 {
		t.Errorf("client.KeyRouting: %+v, %v; want the routing set, with its time", kr, err)
	}
}
