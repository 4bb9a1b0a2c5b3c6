package httpapi_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
)

// TestAPI_metrics: GET /metrics is Prometheus's text format, for admins
// only: the API's requests by route and status, and the coordinator's
// placements, passes and the waits of the engine's asks.
func TestAPI_metrics(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, acct, renterSecret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	if _, err := f.Admin.TopUp(ctx, acct.ID, 100*idlegrid.MicrosPerUnit, "first"); err != nil {
		t.Fatal(err)
	}
	agent, _, _ := f.mustNode(t, provider, "rig1")
	job, err := renter.SubmitJob(ctx, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	mustStartCommand(t, agent, job.ID) // placed and stored
	// A node list asks the engine.
	if _, err := renter.ListNodes(ctx, idlegrid.NodeFilter{}); err != nil {
		t.Fatal(err)
	}
	if _, err := renter.FindJob(ctx, "job_nope"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Fatalf("a job that is not there: %v", err)
	}

	got := mustDo(t, request(t, "GET", f.URL+"/metrics", f.AdminSecret, ""))
	if got.Status != http.StatusOK || !strings.HasPrefix(got.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics as the admin: %d %s", got.Status, got.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`idlegrid_http_requests_total{code="201",route="POST /v1/jobs"} 1`,
		`idlegrid_http_requests_total{code="404",route="GET /v1/jobs/{id}"} 1`,
		`idlegrid_http_request_duration_seconds_count{route="GET /v1/nodes"} 1`,
		`idlegrid_placements_total 1`,
		`idlegrid_job_watches 0`,
		`idlegrid_offence_hold_restands_queued 0`,
	} {
		if !strings.Contains(string(got.Body), want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
	for _, want := range []string{`idlegrid_schedule_pass_seconds_count [1-9]`, `idlegrid_engine_ask_wait_seconds_count [1-9]`} {
		if !regexp.MustCompile(`(?m)^` + want).Match(got.Body) {
			t.Errorf("GET /metrics lacks a line matching %q", want)
		}
	}
	if got := mustDo(t, request(t, "GET", f.URL+"/metrics", renterSecret, "")); got.Status != http.StatusForbidden {
		t.Errorf("GET /metrics as a renter: %d, want 403", got.Status)
	}
	if got := mustDo(t, request(t, "GET", f.URL+"/metrics", "", "")); got.Status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a key: %d, want 401", got.Status)
	}
}
