package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// signedReceipts returns receipts of the lease from its start, one per
// interval of secs seconds, each claiming its GPUs throughout, signed by key.
func (f *fixture) signedReceipts(tb testing.TB, key ed25519.PrivateKey, leaseID string, secs ...int64) []idlegrid.Receipt {
	tb.Helper()
	l, err := f.Store.FindLease(context.Background(), leaseID)
	if err != nil {
		tb.Fatal(err)
	}
	var out []idlegrid.Receipt
	start, prev := *l.StartedAt, ""
	for i, s := range secs {
		r := idlegrid.Receipt{LeaseID: leaseID, Seq: int64(i + 1), Start: start, End: start.Add(time.Duration(s) * time.Second),
			GPUSeconds: s * int64(len(l.GPUUUIDs)), AvgUtilPct: 75, PrevHash: prev}
		nodekey.SignReceipt(key, &r)
		out = append(out, r)
		start, prev = r.End, r.Hash()
	}
	return out
}

// mustSendReceipts has the node sign receipts for its lease and send them.
func (f *fixture) mustSendReceipts(tb testing.TB, agent *client.AgentClient, key ed25519.PrivateKey, leaseID string, secs ...int64) []idlegrid.Receipt {
	tb.Helper()
	rs := f.signedReceipts(tb, key, leaseID, secs...)
	if err := agent.SendReceipts(context.Background(), leaseID, rs); err != nil {
		tb.Fatalf("send receipts: %v", err)
	}
	return rs
}

// TestAPI_receipts sends receipts through the agent API and exports them
// through the public one.
func TestAPI_receipts(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, renterAcct, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	nosy, _, _ := f.mustAccount(t, "nosy", idlegrid.RoleRenter)
	if _, err := f.Admin.TopUp(ctx, renterAcct.ID, 10*idlegrid.MicrosPerUnit, "t"); err != nil {
		t.Fatal(err)
	}
	agent, key, nodeID := f.mustNode(t, provider, "rig1")
	job, err := renter.SubmitJob(ctx, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	lease := mustStartCommand(t, agent, job.ID).Lease
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(2 * time.Minute)
	if last, err := agent.LastReceipt(ctx, lease.ID); err != nil || last != nil {
		t.Errorf("LastReceipt before any = %+v, %v; want none", last, err)
	}

	sent := f.mustSendReceipts(t, agent, key, lease.ID, 60, 60)
	if err := agent.SendReceipts(ctx, lease.ID, sent); err != nil {
		t.Errorf("sending the same receipts again: %v, want a no-op", err)
	}
	if last, err := agent.LastReceipt(ctx, lease.ID); err != nil || last == nil || last.Hash() != sent[1].Hash() || last.Signature != sent[1].Signature {
		t.Errorf("LastReceipt = %+v, %v; want receipt 2 as sent", last, err)
	}
	other, _, _ := f.mustNode(t, provider, "rig2")
	if _, err := other.LastReceipt(ctx, lease.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("LastReceipt from another node: err = %v, want not found", err)
	}
	forged := f.signedReceipts(t, mustKey(t), lease.ID, 60, 60, 1)[2:]
	forged[0].PrevHash = sent[1].Hash()
	err = agent.SendReceipts(ctx, lease.ID, forged)
	var e *idlegrid.Error
	if !asErr(err, &e) || e.Code != idlegrid.EINVALID || e.Field != "receipt.signature" {
		t.Errorf("forged receipt: err = %#v, want EINVALID on receipt.signature", err)
	}

	for _, who := range []struct {
		name string
		c    *client.Client
	}{{"renter", renter}, {"provider", provider}, {"admin", f.Admin}} {
		got, err := who.c.ListReceipts(ctx, lease.ID)
		if err != nil {
			t.Fatalf("%s: ListReceipts: %v", who.name, err)
		}
		if got.LeaseID != lease.ID || got.NodeID != nodeID || got.GPUSeconds != 120 || len(got.Receipts) != 2 {
			t.Fatalf("%s: export = %+v, want 2 receipts, 120 GPU-seconds", who.name, got)
		}
		pub, err := nodekey.ParsePublic(got.NodePublicKey)
		if err != nil || !pub.Equal(key.Public()) {
			t.Fatalf("%s: exported key %q is not the node's (%v)", who.name, got.NodePublicKey, err)
		}
		for i := range got.Receipts {
			if err := nodekey.VerifyReceipt(pub, &got.Receipts[i]); err != nil || got.Receipts[i].Hash() != sent[i].Hash() {
				t.Errorf("%s: receipt %d: %v, or it changed on the way", who.name, i+1, err)
			}
		}
	}
	if _, err := nosy.ListReceipts(ctx, lease.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("another renter: err = %v, want not found", err)
	}
	a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/leases/"+lease.ID+"/receipts?x=1", f.AdminSecret, ""))
	if a.Status != http.StatusBadRequest {
		t.Errorf("unknown query parameter: status %d, want 400", a.Status)
	}
	a = mustDo(t, request(t, http.MethodPost, f.URL+"/v1/agent/leases/"+lease.ID+"/receipts", f.AdminSecret, `{"receipts":[]}`))
	if a.Status < 400 || a.Status >= 500 {
		t.Errorf("receipts with an API key: status %d, want a refusal (only a node's signature will do)", a.Status)
	}
	a = mustDo(t, request(t, http.MethodGet, f.URL+"/v1/agent/leases/"+lease.ID+"/receipts/last", f.AdminSecret, ""))
	if a.Status < 400 || a.Status >= 500 {
		t.Errorf("last receipt with an API key: status %d, want a refusal (only a node's signature will do)", a.Status)
	}
}

func asErr(err error, e **idlegrid.Error) bool {
	v, ok := err.(*idlegrid.Error)
	*e = v
	return ok
}
