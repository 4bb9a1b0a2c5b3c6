package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
)

// TestAPI_longReportEndsTheLease: a node's report whose message is longer
// than the audit log could keep still ends its lease, with the message
// cut on a character's edge and marked so; refused, the lease would run
// for good.
func TestAPI_longReportEndsTheLease(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, renterAcct, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	if _, err := f.Admin.TopUp(ctx, renterAcct.ID, 100*idlegrid.MicrosPerUnit, "funds"); err != nil {
		t.Fatal(err)
	}
	agent, _, _ := f.mustNode(t, provider, "rig1")
	job, err := renter.SubmitJob(ctx, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	lease := mustStartCommand(t, agent, job.ID).Lease
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatal(err)
	}
	msg := strings.Repeat("é", 35_000) // 70,000 bytes
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Message: msg}); err != nil {
		t.Fatalf("a failure with a 70,000-byte message: %v, want the lease ended", err)
	}
	l, events, err := renter.FindLease(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l.State != idlegrid.LeaseFailed || len(l.Reason) > 4096 || !utf8.ValidString(l.Reason) ||
		!strings.HasPrefix(l.Reason, "éé") || !strings.HasSuffix(l.Reason, "[cut: 70000 bytes in all]") {
		t.Errorf("lease %s, reason of %d bytes ending %q; want failed, the message cut to 4096 bytes and marked",
			l.State, len(l.Reason), l.Reason[max(0, len(l.Reason)-40):])
	}
	if last := events[len(events)-1]; last.To != idlegrid.LeaseFailed || last.Reason != l.Reason {
		t.Errorf("last event %s: %.40q…, want the failure with the lease's reason", last.To, last.Reason)
	}
}

// TestAPI_disputeTextLimits: evidence and a resolution are bounded where
// an operator writes them, so that a dispute opened can always be closed.
func TestAPI_disputeTextLimits(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	_, providerAcct, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	open := func(evidence string) (*idlegrid.Dispute, error) {
		return f.Admin.OpenDispute(ctx, idlegrid.Dispute{Offence: "fake_hardware", ProviderID: providerAcct.ID, Evidence: evidence})
	}
	if _, err := open(strings.Repeat("x", 65200)); !isInvalid(err, "dispute.evidence") {
		t.Errorf("evidence of 65,200 bytes: %v, want EINVALID naming dispute.evidence", err)
	}
	d, err := open(strings.Repeat("\n", idlegrid.MaxDisputeEvidenceBytes))
	if err != nil {
		t.Fatalf("evidence at the limit: %v", err)
	}
	if _, err := f.Admin.DismissDispute(ctx, d.ID, strings.Repeat("r", idlegrid.MaxDisputeResolutionBytes+1)); !isInvalid(err, "resolution") {
		t.Errorf("a resolution over the limit: %v, want EINVALID naming resolution", err)
	}
	if got, err := f.Admin.DismissDispute(ctx, d.ID, strings.Repeat("r", idlegrid.MaxDisputeResolutionBytes)); err != nil || got.State != idlegrid.DisputeDismissed {
		t.Errorf("dismissed with the longest resolution: %v, %v; want it dismissed", got, err)
	}
}

func isInvalid(err error, field string) bool {
	var e *idlegrid.Error
	return asErr(err, &e) && e.Code == idlegrid.EINVALID && e.Field == field
}

// TestAPI_agentBodiesNameTheField: what a node sends with a time that is
// not one, or bytes that are not base64, is refused naming where.
func TestAPI_agentBodiesNameTheField(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	_, key, nodeID := f.mustNode(t, provider, "rig1")
	for _, tt := range []struct{ path, body, field string }{
		{"/v1/agent/heartbeat", `{"leases":[{"lease_id":"lease_x","progress":0.5,"checkpoint_at":12345}]}`, "leases[0].checkpoint_at"},
		{"/v1/agent/leases/lease_x/logs", `{"lines":[{"seq":1,"at":1,"stream":"stdout","text":"a"}]}`, "lines[0].at"},
		{"/v1/agent/leases/lease_x/receipts", `{"receipts":[{"lease_id":"lease_x","seq":1,"start":1}]}`, "receipts[0].start"},
		{"/v1/agent/challenges/chl_x/answer", `{"row_hashes":"not base64!","digest":"d"}`, "row_hashes"},
	} {
		req := signed{method: http.MethodPost, path: tt.path, body: tt.body, key: key, nodeID: nodeID, at: time.Now(), protocol: "1"}
		got := mustDo(t, req.request(t, f.URL))
		if e := got.Err(t); got.Status != http.StatusBadRequest || e.Field != tt.field || !strings.HasPrefix(e.Message, tt.field+": must be ") {
			t.Errorf("POST %s %s: %d %s, want 400 naming %s and what it must be", tt.path, tt.body, got.Status, got.Body, tt.field)
		}
	}
}
