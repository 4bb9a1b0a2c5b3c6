package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

func TestAPI_attestation(t *testing.T) {
	ctx := context.Background()
	f := mustOpen(t, httpapi.Options{})
	provider, _, providerSecret := f.mustAccount(t, "barn", idlegrid.RoleProvider)
	_, _, renterSecret := f.mustAccount(t, "acme", idlegrid.RoleRenter)
	agent, key, nodeID := f.mustNode(t, provider, "rig1")
	gpus := testOffer("rig1").GPUs
	gpus[0].VBIOSVersion = "95.02.18.80.87"
	signed := func() idlegrid.Attestation {
		a := idlegrid.Attestation{NodeID: nodeID, Fingerprint: idlegrid.FingerprintOf(gpus), SignedAt: f.Clock.Now()}
		nodekey.SignAttestation(key, &a)
		return a
	}

	t.Run("Tampered", func(t *testing.T) {
		a := signed()
		a.Fingerprint.GPUs[0].VBIOSVersion = "95.02.99.00.00"
		_, err := agent.Attest(ctx, a)
		if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Fatalf("Attest(tampered) = %v, want invalid", err)
		}
		if e, ok := err.(*idlegrid.Error); !ok || e.Field != "attestation.signature" {
			t.Fatalf("error = %#v, want it to name attestation.signature", err)
		}
	})
	t.Run("Unsigned", func(t *testing.T) {
		req := request(t, http.MethodPost, f.URL+"/v1/agent/attestation", providerSecret, `{}`)
		req.Header.Set(nodekey.HeaderProtocol, "1")
		got := mustDo(t, req)
		if got.Status != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401: %s", got.Status, got.Body)
		}
	})

	resp, err := agent.Attest(ctx, signed())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Challenges) != 1 || resp.Hash != signed().Fingerprint.Hash() {
		t.Fatalf("Attest = %+v, want the fingerprint's hash and the at-join challenge", resp)
	}
	pending, err := agent.PendingChallenges(ctx)
	if err != nil || len(pending) != 1 || pending[0].ID != resp.Challenges[0].ID {
		t.Fatalf("PendingChallenges = %+v, %v", pending, err)
	}
	got, err := agent.AnswerChallenge(ctx, pending[0].ID, idlegrid.ChallengeAnswer{Unsupported: "no kernel"})
	if err != nil || got.State != idlegrid.ChallengeUnsupported {
		t.Fatalf("AnswerChallenge = %+v, %v", got, err)
	}

	t.Run("Record", func(t *testing.T) {
		v, err := provider.NodeAttestation(ctx, nodeID)
		if err != nil || v.Current == nil || v.Current.Fingerprint.GPUs[0].VBIOSVersion != "95.02.18.80.87" || len(v.Challenges) != 1 {
			t.Fatalf("NodeAttestation = %+v, %v", v, err)
		}
		if got := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/nodes/"+nodeID+"/attestation", renterSecret, "")); got.Status != http.StatusForbidden {
			t.Fatalf("a renter reading it: %d, want 403", got.Status)
		}
		// Empty lists are [], never left out.
		got := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/nodes/"+nodeID+"/attestation", providerSecret, ""))
		for _, field := range []string{`"changes":[]`, `"quarantines":[]`} {
			if got.Status != http.StatusOK || !strings.Contains(string(got.Body), field) {
				t.Errorf("the node's attestation: %d %s, want %s", got.Status, got.Body, field)
			}
		}
	})

	t.Run("Quarantine", func(t *testing.T) {
		if got := mustDo(t, request(t, http.MethodPost, f.URL+"/v1/nodes/"+nodeID+"/quarantine", providerSecret, `{"reason":"x"}`)); got.Status != http.StatusForbidden {
			t.Fatalf("a provider quarantining: %d, want 403", got.Status)
		}
		got := mustDo(t, request(t, http.MethodPost, f.URL+"/v1/nodes/"+nodeID+"/quarantine", f.AdminSecret, `{"reason":""}`))
		if got.Status != http.StatusBadRequest || got.Err(t).Field != "reason" {
			t.Fatalf("no reason: %d %s, want 400 naming reason", got.Status, got.Body)
		}
		if _, err := f.Admin.QuarantineNode(ctx, nodeID, "receipts disagree"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Admin.QuarantineNode(ctx, nodeID, "again"); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			t.Fatalf("quarantining twice = %v, want conflict", err)
		}
		n, err := provider.FindNode(ctx, nodeID)
		if err != nil || !n.Quarantined {
			t.Fatalf("FindNode = %+v, %v; want quarantined", n, err)
		}
		if got := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/quarantine?state=bogus", f.AdminSecret, "")); got.Status != http.StatusBadRequest || got.Err(t).Field != "state" {
			t.Fatalf("bad state: %d %s, want 400 naming state", got.Status, got.Body)
		}
		qs, err := provider.ListQuarantines(ctx, false)
		if err != nil || len(qs) != 1 || qs[0].Reason != "receipts disagree" {
			t.Fatalf("the provider's quarantines = %+v, %v", qs, err)
		}
		if _, err := provider.LiftQuarantine(ctx, nodeID, ""); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Fatalf("the provider lifting = %v, want forbidden", err)
		}
		if _, err := f.Admin.LiftQuarantine(ctx, nodeID, "checked"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Admin.LiftQuarantine(ctx, nodeID, "again"); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			t.Fatalf("lifting twice = %v, want conflict", err)
		}
		if _, err := f.Admin.LiftQuarantine(ctx, "node_missing", ""); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Fatalf("lifting an unknown node = %v, want not found", err)
		}
	})
}
