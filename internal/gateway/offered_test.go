package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// TestGateway_offeredNodesOnly: a quarantined node and a draining node
// are out of the market, for inference as for leases: they get no
// requests and do not count in GET /v1/models, though their agents still
// hold sessions and their model servers answer.
func TestGateway_offeredNodesOnly(t *testing.T) {
	f := mustFixture(t, nil)
	ctx := context.Background()
	quarantined, draining, ok := mustMock(t, "quarantined"), mustMock(t, "draining"), mustMock(t, "ok")
	nq := f.startAgent(t, "quarantined", "eu-west", "EU", quarantined.model(testModel, "1", "1", 8)) // the cheapest two
	nd := f.startAgent(t, "draining", "eu-west", "EU", draining.model(testModel, "2", "2", 8))
	f.startAgent(t, "ok", "eu-west", "EU", ok.model(testModel, "30", "60", 8))
	f.waitProviders(t, testModel, 3)
	if _, err := f.Admin.QuarantineNode(ctx, nq.NodeID, "test: bad hardware"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(f.URL, f.providerKey).DrainNode(ctx, nd.NodeID, true); err != nil {
		t.Fatal(err)
	}
	f.waitProviders(t, testModel, 1)
	p := &pair{fixture: f}
	for i := range 4 {
		if _, _, err := p.chat(t, cheapestFirst); err != nil {
			t.Fatalf("request %d: %s", i, describe(err))
		}
	}
	if n, m := quarantined.Calls.Load(), draining.Calls.Load(); n != 0 || m != 0 {
		t.Errorf("the quarantined node got %d requests and the draining one %d, want none", n, m)
	}
	if n := ok.Served.Load(); n != 4 {
		t.Errorf("the offered node served %d requests, want 4", n)
	}
	if m := listModel(t, f, f.RenterKey, testModel); m == nil || m.Pricing == nil || m.Pricing.InputMicrosPerMTokens != 30_000_000 {
		t.Errorf("GET /v1/models lists %+v, want the offered node's prices only", m)
	}
}

// TestGateway_modelsByKeyRouting: GET /v1/models applies the caller's
// key's routing as its requests do: a key bound to a region sees the
// providers there, and their prices, only, and not a model no provider
// there serves.
func TestGateway_modelsByKeyRouting(t *testing.T) {
	p := mustPair(t, nil) // alpha: eu-west, 10/20; beta: us-east, 30/60
	ctx := context.Background()
	renter := client.New(p.URL, p.RenterKey)
	key := func(name string, access idlegrid.Access, rt idlegrid.Routing) string {
		k, secret, err := renter.CreateAPIKeyWithAccess(ctx, name, access)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := renter.SetKeyRouting(ctx, k.ID, rt); err != nil {
			t.Fatal(err)
		}
		return secret
	}
	usEast := key("us-east", idlegrid.AccessUse, idlegrid.Routing{Region: []string{"us-east"}})
	if m := listModel(t, p.fixture, usEast, testModel); m == nil || m.Providers != 1 || m.Pricing == nil ||
		m.Pricing.InputMicrosPerMTokens != 30_000_000 || m.Pricing.OutputMicrosPerMTokens != 60_000_000 {
		t.Errorf("a key bound to us-east is listed %+v, want beta alone, at its prices", m)
	}
	nowhere := key("nowhere", idlegrid.AccessAll, idlegrid.Routing{Region: []string{"ap-south"}})
	if m := listModel(t, p.fixture, nowhere, testModel); m != nil {
		t.Errorf("a key whose region no provider is in is listed %+v, want no model", m)
	}
	if m := listModel(t, p.fixture, p.RenterKey, testModel); m == nil || m.Providers != 2 || m.Pricing.InputMicrosPerMTokens != 10_000_000 {
		t.Errorf("a key without routing is listed %+v, want both providers, from alpha's price", m)
	}
}

// listModel is model as GET /v1/models lists it to key; nil when it is
// not listed.
func listModel(tb testing.TB, f *fixture, key, model string) *openai.Model {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var list openai.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /v1/models: %d, %v", resp.StatusCode, err)
	}
	for _, m := range list.Data {
		if m.ID == model {
			return &m
		}
	}
	return nil
}
