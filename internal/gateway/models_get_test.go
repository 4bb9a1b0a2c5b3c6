package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// GET /v1/models/{model} answers one model as the list does, as OpenAI's
// SDKs retrieve it, created when the gateway began to list it, and 404 for
// one nobody serves; a wrong method on an OpenAI path is a 405 in OpenAI's
// format, with Allow.
func TestGateway_modelAndMethods(t *testing.T) {
	before := time.Now().Unix()
	f := mustFixture(t, nil)
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	m, err := sdk.Models.Get(ctx, testModel)
	if err != nil || m.ID != testModel {
		t.Fatalf("Models.Get(%s) = %+v, %v", testModel, m, err)
	}
	if m.Created < before || m.Created > time.Now().Unix() {
		t.Errorf("created %d, want when the gateway began to list it, from %d to now", m.Created, before)
	}
	time.Sleep(time.Second + f.catalogTTL) // the catalog refreshed, a second on: created stays
	if again, err := sdk.Models.Get(ctx, testModel); err != nil || again.Created != m.Created {
		t.Errorf("a second later, created %d, %v; want %d still", again.Created, err, m.Created)
	}
	// A name with a slash, as Hugging Face names models: the SDK sends it
	// as it is, not escaped.
	f.startAgent(t, "beta", "eu-west", "EU", up.model("meta-llama/llama-test", "10", "20", 4))
	f.waitProviders(t, "meta-llama/llama-test", 1)
	if m, err := sdk.Models.Get(ctx, "meta-llama/llama-test"); err != nil || m.ID != "meta-llama/llama-test" {
		t.Errorf("Models.Get(meta-llama/llama-test) = %+v, %v", m, describe(err))
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.URL+"/v1/models/meta-llama/llama-test", nil) // as Python's SDK sends it
	req.Header.Set("Authorization", "Bearer "+f.RenterKey)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/models/meta-llama/llama-test: %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	_, err = sdk.Models.Get(ctx, "gpt-nope")
	if e := apiError(t, err); e.StatusCode != 404 || e.Type != "not_found_error" {
		t.Errorf("Models.Get(gpt-nope): %d %s (%s), want 404 not_found_error", e.StatusCode, e.Type, e.Message)
	}
	for path, allow := range map[string]string{"/v1/chat/completions": "POST", "/v1/embeddings": "POST", "/v1/models": "GET"} {
		method := http.MethodGet
		if allow == "GET" {
			method = http.MethodDelete
		}
		req, _ := http.NewRequestWithContext(ctx, method, f.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+f.RenterKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != allow ||
			body.Error.Type != "invalid_request_error" || !strings.Contains(body.Error.Message, "use "+allow) {
			t.Errorf("%s %s: %d, Allow %q, %+v; want 405 in OpenAI's format allowing %s", method, path, resp.StatusCode, resp.Header.Get("Allow"), body.Error, allow)
		}
	}
}
