package httpapi_test

import (
	"context"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// TestAPI_reputation completes a lease and reads the node's and provider's
// reputation through the client: the owner sees the evidence, others only
// the standing.
func TestAPI_reputation(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, renterAcct, renterSecret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, providerAcct, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	rival, _, _ := f.mustAccount(t, "rival", idlegrid.RoleProvider)
	if _, err := f.Admin.TopUp(ctx, renterAcct.ID, 10*idlegrid.MicrosPerUnit, "t"); err != nil {
		t.Fatal(err)
	}
	agent, _, nodeID := f.mustNode(t, provider, "rig1")
	job, err := renter.SubmitJob(ctx, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	lease := mustStartCommand(t, agent, job.ID).Lease
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(time.Minute)
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: new(int)}); err != nil {
		t.Fatal(err)
	}
	const want = 10.0 / 11 // one completion over the prior of 9 good in 10

	own, err := provider.NodeReputation(ctx, nodeID)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(own.Score-want) > 1e-4 || own.Detail == nil || len(own.Detail.Facts) != 1 || own.Detail.Facts[0].Kind != "lease_completed" {
		t.Fatalf("owner's view = %+v (detail %+v), want score %.4f and the completion", own, own.Detail, want)
	}
	if own.PolicyVersion != trustpolicy.Version || own.Detail.Formula == "" || len(own.Detail.Advice) == 0 {
		t.Errorf("owner's view lacks the policy version, formula or advice: %+v", own.Detail)
	}
	for _, who := range []struct {
		name   string
		view   func() (*idlegrid.ReputationView, error)
		detail bool
	}{
		{"renter, node", func() (*idlegrid.ReputationView, error) { return renter.NodeReputation(ctx, nodeID) }, false},
		{"another provider, node", func() (*idlegrid.ReputationView, error) { return rival.NodeReputation(ctx, nodeID) }, false},
		{"admin, node", func() (*idlegrid.ReputationView, error) { return f.Admin.NodeReputation(ctx, nodeID) }, true},
		{"renter, provider", func() (*idlegrid.ReputationView, error) { return renter.ProviderReputation(ctx, providerAcct.ID) }, false},
		{"provider, itself", func() (*idlegrid.ReputationView, error) { return provider.ProviderReputation(ctx, providerAcct.ID) }, true},
	} {
		t.Run(who.name, func(t *testing.T) {
			v, err := who.view()
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(v.Score-want) > 1e-4 || v.LevelName != "newcomer" || (v.Detail != nil) != who.detail {
				t.Errorf("view = %+v, want score %.4f, level newcomer, detail %v", v, want, who.detail)
			}
		})
	}
	p, err := renter.TrustPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != trustpolicy.Version || p.GoldMinLevel != 2 || p.SHA256 != own.PolicySHA256 {
		t.Errorf("trust policy = %+v, want version %d, gold at level 2, sha256 %s", p, trustpolicy.Version, own.PolicySHA256)
	}

	for _, tt := range []struct {
		name, path, secret string
		status             int
	}{
		{"unknown node", "/v1/nodes/node_missing/reputation", renterSecret, http.StatusNotFound},
		{"a renter is no provider", "/v1/providers/" + renterAcct.ID + "/reputation", renterSecret, http.StatusNotFound},
		{"unknown query parameter", "/v1/nodes/" + nodeID + "/reputation?x=1", renterSecret, http.StatusBadRequest},
		{"no key", "/v1/trust-policy", "", http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if a := mustDo(t, request(t, http.MethodGet, f.URL+tt.path, tt.secret, "")); a.Status != tt.status {
				t.Errorf("GET %s: status %d, want %d", tt.path, a.Status, tt.status)
			}
		})
	}
}
