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
)

// TestAPI_agentCheck asks what `idlegrid agent --check` asks: whether a
// join token would do, without using it, and what the server knows of a
// node that joined.
func TestAPI_agentCheck(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	provider, providerAcct, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	tok, secret, err := provider.CreateJoinToken(ctx, "rack-7", 2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	anyone := client.New(f.URL, "")

	got, err := anyone.CheckJoinToken(ctx, secret)
	if err != nil || got.ID != tok.ID || got.ProviderID != providerAcct.ID || got.Uses != 0 || got.MaxUses != 2 || got.Hash != "" {
		t.Fatalf("CheckJoinToken = %+v, %v; want the token, unused", got, err)
	}
	got, err = anyone.CheckJoinToken(ctx, secret)
	if err != nil || got.Uses != 0 {
		t.Errorf("CheckJoinToken again = %+v, %v; want it still unused: a check uses nothing", got, err)
	}
	for _, tt := range []struct {
		name, token, code, says string
	}{
		{"unknown", "igj_nosuch", idlegrid.EUNAUTHORIZED, "unknown join token"},
		{"empty", "", idlegrid.EINVALID, "token: required"},
	} {
		if _, err := anyone.CheckJoinToken(ctx, tt.token); idlegrid.ErrorCode(err) != tt.code || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s token: err = %v, want %s saying %q", tt.name, err, tt.code, tt.says)
		}
	}
	if err := provider.RevokeJoinToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := anyone.CheckJoinToken(ctx, secret); idlegrid.ErrorCode(err) != idlegrid.EUNAUTHORIZED || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("revoked token: err = %v, want unauthorized saying it was revoked", err)
	}

	agent, _, nodeID := f.mustNode(t, provider, "rig1")
	n, err := agent.Node(ctx)
	if err != nil || n.ID != nodeID || n.ProviderID != providerAcct.ID || n.State != idlegrid.NodeOnline {
		t.Fatalf("Node = %+v, %v; want node %s of %s, online", n, err, nodeID, providerAcct.ID)
	}
	if a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/agent/node", f.AdminSecret, "")); a.Status < 400 || a.Status >= 500 {
		t.Errorf("GET /v1/agent/node with an API key: status %d, want a refusal (only a node's signature will do)", a.Status)
	}
}
