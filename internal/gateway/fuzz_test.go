package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fuzzPaths are the endpoints FuzzGateway calls, by the fuzzer's index;
// those ending in "?" (a kept response's input items, a renter's
// conversation usage) with the body as their query.
var fuzzPaths = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models", "/v1/responses", "/v1/responses/resp_none/input_items?", "/v1/conversations", "/v1/inference/conversations?"}

// notInQuery are the characters a URL's query never holds as sent.
func notInQuery(r rune) bool { return r <= ' ' || r >= 0x7f || r == '#' }

// FuzzGateway sends the OpenAI-compatible endpoints malformed and
// unexpected bodies and routing, through the whole path (the gateway, a
// real agent's session, a mock model server), and holds the gateway to
// its promise: a renter's mistake is never an internal error, nothing
// hangs, and every refusal is in OpenAI's error format with a message
// and a type. The seeds run with the tests; `go test -fuzz FuzzGateway
// ./internal/gateway` searches further.
func FuzzGateway(f *testing.F) {
	for _, seed := range []struct {
		path int
		body string
	}{
		{0, `{"model":"llama-test","messages":[{"role":"user","content":"Hi"}]}`},
		{0, `{"model":"llama-test","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":[{"type":"text","text":"Hi"}]}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5}`},
		{0, `{"model":"llama-test","messages":[{"role":"user","content":"Hi"}],"provider":{"sort":"latency","order":["acct_x"],"ignore":["acct_y"],"allow_fallbacks":true,"region":["eu-west"],"data_residency":["EU"],"max_price":{"prompt":100,"completion":200},"sticky":true}}`},
		{0, `{"model":"llama-test","messages":[{"role":"user","content":"\u0000"}],"provider":{"sort":"cheapest","region":"eu-west","max_price":{"prompt":-1}}}`},
		{0, `{"model":"llama-test","messages":[],"n":1e309,"temperature":"hot"}`},
		{0, `{"model":"nope","messages":[{"role":"user","content":"Hi"}]}`},
		{1, `{"model":"llama-test","prompt":"Once upon a time","max_tokens":3}`},
		{1, `{"model":"llama-test","prompt":["a","b"],"stream":true}`},
		{2, `{"model":"llama-test","input":"embed me"}`},
		{2, `{"model":"llama-test","input":[[1,2,3]],"encoding_format":"base64"}`},
		{3, ``},
		{4, `{"model":"llama-test","instructions":"Be terse.","input":"Hi","max_output_tokens":5}`},
		{4, `{"model":"llama-test","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"},{"type":"input_image","image_url":"data:,"}]},{"type":"function_call_output","call_id":"c","output":"ok"}],"stream":true,"store":true}`},
		{4, `{"model":"llama-test","input":[{"type":"item_reference","id":"msg_1"}],"previous_response_id":7}`},
		{4, `{"model":"llama-test","input":"And then?","previous_response_id":"resp_none","store":false}`},
		{4, `{"model":"llama-test","input":"Write a report.","background":true,"max_output_tokens":5}`},
		{5, `limit=2&order=asc&after=msg_1&include[]=x&include[]=y`},
		{5, `limit=0&order=sideways&%zz`},
		{6, `{"items":[{"role":"user","content":"Hi"},{"type":"function_call_output","call_id":"c","output":"ok"}],"metadata":{"topic":"tea"}}`},
		{6, `{"items":[{"type":"item_reference","id":"x"}],"metadata":{"":1}}`},
		{7, ``},
		{7, `limit=5`},
		{4, `{"model":"llama-test","input":"Hi","conversation":{"id":"conv_none"}}`},
		{4, `{"model":"llama-test","input":"Hi","conversation":7,"previous_response_id":"resp_none"}`},
		{0, `{"model":`},
		{0, `[]`},
	} {
		f.Add(uint8(seed.path), []byte(seed.body))
	}
	fx := mustFixture(f, nil)
	up := mustMock(f, "alpha")
	fx.startAgent(f, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	fx.waitProviders(f, testModel, 1)
	hc := &http.Client{Timeout: 20 * time.Second} // a request the gateway never ends fails the fuzz
	f.Fuzz(func(t *testing.T, path uint8, body []byte) {
		p := fuzzPaths[int(path)%len(fuzzPaths)]
		method := http.MethodPost
		if p == "/v1/models" {
			method = http.MethodGet
		}
		req, err := http.NewRequest(method, fx.URL+p, bytes.NewReader(body))
		if strings.HasSuffix(p, "?") {
			method = http.MethodGet
			if strings.ContainsFunc(string(body), notInQuery) {
				return // a request line no client sends, which Go's server refuses before any handler
			}
			if req, err = http.NewRequest(method, fx.URL+p+string(body), nil); err != nil {
				return
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+fx.RenterKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s %q: %v", method, p, body, err)
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s %s %q: reading the answer: %v", method, p, body, err)
		}
		if resp.StatusCode == http.StatusInternalServerError {
			t.Fatalf("%s %s %q: 500 %s", method, p, body, answer)
		}
		if resp.StatusCode < 400 {
			return
		}
		var e struct {
			Error struct{ Message, Type string } `json:"error"`
		}
		if err := json.Unmarshal(answer, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("%s %s %q: %d %q, want OpenAI's error format (%v)", method, p, body, resp.StatusCode, answer, err)
		}
	})
}
