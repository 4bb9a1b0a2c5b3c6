package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
)

// An OpenAI endpoint the gateway does not serve is a 404 in OpenAI's
// format, with or without a key, naming the request and the endpoints it
// does serve; a path of the API's own under /v1 keeps the API's format.
func TestGateway_unknownPath(t *testing.T) {
	f := mustFixture(t, nil)
	ctx := context.Background()

	// As an OpenAI SDK sees it.
	sdk := f.sdk(f.RenterKey)
	_, err := sdk.Images.Generate(ctx, oai.ImageGenerateParams{Prompt: "a cat"})
	if e := apiError(t, err); e.StatusCode != http.StatusNotFound || e.Type != "invalid_request_error" ||
		!strings.Contains(e.Message, "POST /v1/images/generations") {
		t.Errorf("Images.Generate: %d %s (%s), want 404 invalid_request_error naming POST /v1/images/generations", e.StatusCode, e.Type, e.Message)
	}

	type openAIError struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	do := func(t *testing.T, method, path, key string) (*http.Response, map[string]json.RawMessage) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, f.URL+path, strings.NewReader("{}"))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var body struct {
			Error map[string]json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(b, &body); err != nil || body.Error == nil {
			t.Fatalf("%s %s: %d %s, not an error body", method, path, resp.StatusCode, b)
		}
		return resp, body.Error
	}
	for _, tt := range []struct{ name, method, path, key string }{
		{"no key", "GET", "/v1/foo", ""},
		{"a key", "POST", "/v1/audio/speech", f.RenterKey},
		{"a wrong key", "POST", "/v1/batches", "igk_wrong"},
		{"under a gateway route", "POST", "/v1/chat/completions/extra", f.RenterKey},
		{"/v1 itself", "GET", "/v1/", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := do(t, tt.method, tt.path, tt.key)
			var e openAIError
			b, _ := json.Marshal(raw)
			json.Unmarshal(b, &e)
			if _, ok := raw["param"]; !ok || e.Param != nil {
				t.Errorf("param = %s, want null", raw["param"])
			}
			if resp.StatusCode != http.StatusNotFound || e.Type != "invalid_request_error" || e.Code == nil || *e.Code != "not_found" {
				t.Fatalf("%s %s: %d %s, want 404 invalid_request_error not_found in OpenAI's format", tt.method, tt.path, resp.StatusCode, b)
			}
			for _, want := range []string{tt.method + " " + tt.path, "GET /v1/models", "POST /v1/chat/completions", "POST /v1/completions", "POST /v1/embeddings", "POST /v1/responses"} {
				if !strings.Contains(e.Message, want) {
					t.Errorf("message %q does not name %q", e.Message, want)
				}
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != "" {
				t.Errorf("WWW-Authenticate = %q on a 404", got)
			}
		})
	}

	// A wrong method on the gateway's own statistics: 405 in OpenAI's format.
	resp, raw := do(t, "POST", "/v1/inference/stats", f.RenterKey)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" ||
		string(raw["type"]) != `"invalid_request_error"` || string(raw["code"]) != `"method_not_allowed"` {
		t.Errorf("POST /v1/inference/stats: %d, Allow %q, %s; want 405 in OpenAI's format allowing GET", resp.StatusCode, resp.Header.Get("Allow"), jsonText(raw))
	}

	// The API's own paths under /v1 answer in its own format: code and
	// message, no type.
	for _, tt := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v1/jobs/job_x/nope", http.StatusNotFound, `"not_found"`},
		{"GET", "/v1/agent/nope", http.StatusNotFound, `"not_found"`},
		{"DELETE", "/v1/jobs", http.StatusBadRequest, `"invalid"`},
	} {
		resp, raw := do(t, tt.method, tt.path, f.RenterKey)
		if _, typed := raw["type"]; resp.StatusCode != tt.status || typed || string(raw["code"]) != tt.code {
			t.Errorf("%s %s: %d %s; want %d %s in the API's format", tt.method, tt.path, resp.StatusCode, jsonText(raw), tt.status, tt.code)
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
