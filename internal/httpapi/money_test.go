package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// mustEarn runs one lease of renter's job on a new node of provider for
// 90 GPU-seconds with receipts, and returns it ended.
func (f *fixture) mustEarn(t *testing.T, renter, provider *client.Client) *idlegrid.Lease {
	t.Helper()
	ctx := context.Background()
	agent, key, _ := f.mustNode(t, provider, "rig-"+idlegrid.NewID("n"))
	job, err := renter.SubmitJob(ctx, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	lease := mustStartCommand(t, agent, job.ID).Lease
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(90 * time.Second)
	f.mustSendReceipts(t, agent, key, lease.ID, 60, 30)
	exit := 0
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &exit}); err != nil {
		t.Fatal(err)
	}
	l, _, err := renter.FindLease(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAPI_payouts(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, renterAcct, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, providerAcct, providerSecret := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	if _, err := f.Admin.TopUp(ctx, renterAcct.ID, 100*idlegrid.MicrosPerUnit, "t"); err != nil {
		t.Fatal(err)
	}
	l := f.mustEarn(t, renter, provider)
	earned := l.ChargedMicros - l.ChargedMicros/10
	if b, _ := provider.Balance(ctx, ""); b.Pending != earned || b.Payable != 0 {
		t.Fatalf("provider balance %+v, want %s pending", b, earned)
	}
	if _, err := provider.RequestPayout(ctx, 1, "too-soon"); idlegrid.ErrorCode(err) != idlegrid.EPAYMENT {
		t.Fatalf("payout inside the hold: %v, want EPAYMENT", err)
	}
	f.Clock.Advance(server72h + time.Minute)
	if err := f.Server.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _ := provider.Balance(ctx, ""); b.Payable != earned || b.Pending != 0 {
		t.Fatalf("after the hold: %+v, want %s payable", b, earned)
	}

	// The header is required.
	a := mustDo(t, request(t, http.MethodPost, f.URL+"/v1/payouts", providerSecret, `{"amount_micros":1}`))
	if a.Status != http.StatusBadRequest || a.Err(t).Field != wire.HeaderIdempotencyKey {
		t.Fatalf("payout without an idempotency key: %d %s", a.Status, a.Body)
	}
	p, err := provider.RequestPayout(ctx, earned, "nov-1")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := provider.RequestPayout(ctx, earned, "nov-1"); err != nil || again.ID != p.ID {
		t.Fatalf("retried payout = %+v, %v; want %s", again, err, p.ID)
	}
	if _, err := renter.ListPayouts(ctx, idlegrid.PayoutFilter{}); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
		t.Fatalf("renter lists payouts: %v, want EFORBIDDEN", err)
	}
	if ps, err := f.Admin.ListPayouts(ctx, idlegrid.PayoutFilter{ProviderID: providerAcct.ID, States: []idlegrid.PayoutState{idlegrid.PayoutRequested}}); err != nil || len(ps) != 1 {
		t.Fatalf("admin's list of requested payouts = %d, %v; want 1", len(ps), err)
	}
	if ps, err := provider.ListPayouts(ctx, idlegrid.PayoutFilter{Before: p.ID}); err != nil || len(ps) != 0 {
		t.Fatalf("the page after the only payout = %+v, %v; want none", ps, err)
	}
	a = mustDo(t, request(t, http.MethodGet, f.URL+"/v1/payouts?before=payout_missing", providerSecret, ""))
	if a.Status != http.StatusBadRequest || !strings.Contains(string(a.Body), "before") {
		t.Fatalf("a page after no payout: %d %s, want 400 naming before", a.Status, a.Body)
	}
	if ps, err := provider.ListPayouts(ctx, idlegrid.PayoutFilter{OldestFirst: true}); err != nil || len(ps) != 1 || ps[0].ID != p.ID {
		t.Fatalf("payouts oldest first = %+v, %v; want %s", ps, err, p.ID)
	}
	if ps, err := provider.ListPayouts(ctx, idlegrid.PayoutFilter{OldestFirst: true, After: p.ID}); err != nil || len(ps) != 0 {
		t.Fatalf("the page after the only payout, oldest first = %+v, %v; want none", ps, err)
	}
	for query, field := range map[string]string{"order=first": "order", "after=" + p.ID: "after", "order=oldest&before=" + p.ID: "before"} {
		a = mustDo(t, request(t, http.MethodGet, f.URL+"/v1/payouts?"+query, providerSecret, ""))
		if a.Status != http.StatusBadRequest || !strings.Contains(string(a.Body), `"`+field+`"`) {
			t.Errorf("payouts?%s: %d %s, want 400 naming %s", query, a.Status, a.Body, field)
		}
	}
	a = mustDo(t, request(t, http.MethodPost, f.URL+"/v1/payouts/"+p.ID+"/settle", f.AdminSecret, `{"reason":"wire"}`))
	if a.Status != http.StatusBadRequest {
		t.Fatalf("settle without an idempotency key: %d %s", a.Status, a.Body)
	}
	if _, err := provider.SettlePayout(ctx, p.ID, "wire", "op-1"); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
		t.Fatalf("provider settles its own payout: %v, want EFORBIDDEN", err)
	}
	done, err := f.Admin.SettlePayout(ctx, p.ID, "wire 42", "op-1")
	if err != nil || done.State != idlegrid.PayoutSettled {
		t.Fatalf("settle = %+v, %v", done, err)
	}
	if again, err := f.Admin.SettlePayout(ctx, p.ID, "wire 42", "op-1"); err != nil || again.State != idlegrid.PayoutSettled {
		t.Fatalf("retried settle = %+v, %v", again, err)
	}
	if _, err := f.Admin.RejectPayout(ctx, p.ID, "no", "op-2"); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
		t.Fatalf("rejecting a settled payout: %v, want ECONFLICT", err)
	}
	if b, _ := provider.Balance(ctx, ""); b.Payable != 0 || b.PayoutInFlight != 0 || b.PaidOut != earned {
		t.Fatalf("after the payout: %+v, want %s paid out", b, earned)
	}
	if sum, err := f.Store.LedgerSum(ctx); err != nil || sum != 0 {
		t.Fatalf("ledger sums to %s (%v)", sum, err)
	}
}

// server72h is the coordinator's default payout hold.
const server72h = 72 * time.Hour

func TestAPI_statementsLimitsNotices(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, renterAcct, renterSecret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	if _, err := f.Admin.TopUp(ctx, renterAcct.ID, 100*idlegrid.MicrosPerUnit, "t"); err != nil {
		t.Fatal(err)
	}
	l := f.mustEarn(t, renter, provider)
	month := l.EndedAt.UTC().Format("2006-01")

	s, err := renter.Statement(ctx, "", month)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Lines) != 1 || s.Lines[0].JobID != l.JobID || s.Lines[0].GPUSeconds != 90 || s.Total.ChargedMicros != l.ChargedMicros {
		t.Fatalf("statement %+v, want one line of 90 GPU-s charged %s", s, l.ChargedMicros)
	}
	csv, err := renter.StatementCSV(ctx, "", month)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "month,job_id,") || !strings.Contains(rows[1], l.JobID+",train,1,90,0.025000,") {
		t.Fatalf("CSV statement:\n%s", csv)
	}
	a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/statements?month="+month+"&format=csv", renterSecret, ""))
	if ct := a.Header.Get("Content-Type"); a.Status != http.StatusOK || !strings.HasPrefix(ct, "text/csv") {
		t.Fatalf("CSV answer %d %q", a.Status, ct)
	}
	for _, q := range []string{"", "?month=" + month + "&format=xml", "?month=nov"} {
		if a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/statements"+q, renterSecret, "")); a.Status != http.StatusBadRequest {
			t.Errorf("GET /v1/statements%s: %d %s, want 400", q, a.Status, a.Body)
		}
	}

	if ns, err := renter.ListNotices(ctx, idlegrid.NoticeFilter{}); err != nil || ns == nil || len(ns) != 0 {
		t.Fatalf("notices = %#v, %v; want an empty list", ns, err)
	}

	ten := 10 * idlegrid.MicrosPerUnit
	if _, err := renter.SetAccountLimit(ctx, renterAcct.ID, &ten); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
		t.Fatalf("renter sets its own account limit: %v, want EFORBIDDEN", err)
	}
	st, err := f.Admin.SetAccountLimit(ctx, renterAcct.ID, &ten)
	if err != nil || st.LimitMicros != ten || st.Spend.ChargedMicros != l.ChargedMicros {
		t.Fatalf("account limit = %+v, %v; want $10 with this month's charge", st, err)
	}
	keys, err := renter.ListAPIKeys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	one := idlegrid.MicrosPerUnit
	if _, err := renter.SetKeyLimit(ctx, keys[0].ID, &one); err != nil {
		t.Fatal(err)
	}
	rep, err := renter.SpendLimits(ctx, "")
	if err != nil || len(rep.Limits) != 2 || rep.Spend.ChargedMicros != l.ChargedMicros || rep.Month != f.Clock.Now().UTC().Format("2006-01") {
		t.Fatalf("spend report = %+v, %v", rep, err)
	}
	if _, err := renter.SetKeyLimit(ctx, keys[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Admin.SetAccountLimit(ctx, renterAcct.ID, nil); err != nil {
		t.Fatal(err)
	}
	if rep, err := renter.SpendLimits(ctx, ""); err != nil || len(rep.Limits) != 0 {
		t.Fatalf("limits after lifting both = %+v, %v", rep, err)
	}
	a = mustDo(t, request(t, http.MethodPut, f.URL+"/v1/keys/"+keys[0].ID+"/spend-limit", renterSecret, `{"limit_micros":-1}`))
	if a.Status != http.StatusBadRequest || a.Err(t).Field != "spend_limit.limit_micros" {
		t.Fatalf("negative limit: %d %s", a.Status, a.Body)
	}
}
