package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/metricstest"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// A model server that reports more tokens than it could have used charges
// the renter no more than it could: a prompt of a token a byte sent and
// its template's, a completion of max_tokens, or of a token a byte of the
// text its choices held (not of the bytes relayed, which count a stream
// event's envelope for each token). An honest one is charged its usage as
// before.
func TestGateway_usageCapped(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f := mustFixture(t, func(c *gateway.Config) { c.Metrics = reg })
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	up.set(faultGreedy)
	for _, tc := range []struct {
		name     string
		endpoint openai.Endpoint
		body     string
	}{
		{"chat", openai.ChatCompletions, `{"model":"llama-test","max_tokens":5,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello."}]}`},
		{"stream", openai.ChatCompletions, `{"model":"llama-test","max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello."}]}`},
		{"completion without max_tokens", openai.Completions, `{"model":"llama-test","prompt":"Once upon"}`},
		{"stream without max_tokens", openai.ChatCompletions, `{"model":"llama-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello."}]}`},
		{"embedding", openai.Embeddings, `{"model":"llama-test","input":"embed me"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := available(t, f)
			answer := postAnswer(t, f, tc.endpoint, tc.body)
			req, err := openai.ParseRequest(tc.endpoint, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			// The body goes upstream as the renter sent it.
			in, out := req.MostPromptTokens(len(tc.body)), req.MostCompletionTokens(choicesText(t, answer))
			if tc.endpoint == openai.Embeddings {
				out = 0
			}
			if in > 1000 || out > 1000 {
				t.Fatalf("the bounds %d, %d are not small", in, out)
			}
			if req.MaxTokens > 0 && out != req.MaxTokens {
				t.Errorf("the completion's bound = %d, want max_tokens %d", out, req.MaxTokens)
			}
			mustSync(t, f)
			us, err := f.Store.ListInferenceUsage(context.Background(), idlegrid.UsageFilter{AccountID: f.RenterID, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			want := idlegrid.Micros(10*in + 20*out) // the model's prices, a token
			if u := us[0]; u.InputTokens != in || u.OutputTokens != out || u.ChargeMicros != want {
				t.Errorf("usage %d in, %d out, charge %d; want %d, %d, %d", u.InputTokens, u.OutputTokens, u.ChargeMicros, in, out, want)
			}
			if spent := before - available(t, f); spent != want {
				t.Errorf("the renter paid %d, want %d", spent, want)
			}
		})
	}
	capped := func(kind string) float64 {
		return metricstest.Value(t, reg, "idlegrid_inference_usage_capped_total", map[string]string{"model": testModel, "kind": kind})
	}
	if in, out := capped("input"), capped("output"); in != 5 || out != 4 {
		t.Errorf("capped %v inputs, %v outputs; want 5, 4", in, out)
	}
	t.Run("honest", func(t *testing.T) {
		up.set(faultNone)
		before := available(t, f)
		postAnswer(t, f, openai.ChatCompletions, `{"model":"llama-test","max_tokens":5,"messages":[{"role":"user","content":"Say hello."}]}`)
		mustSync(t, f)
		if spent := before - available(t, f); spent != wantCharge {
			t.Errorf("the renter paid %d, want the model server's usage: %d", spent, wantCharge)
		}
		if in, out := capped("input"), capped("output"); in != 5 || out != 4 {
			t.Errorf("capped %v inputs, %v outputs; want still 5, 4", in, out)
		}
	})
}

// choicesText is the bytes of the strings in an answer's choices (in each
// of its events, for a stream), but their logprobs: the text a completion's
// tokens decode to.
func choicesText(tb testing.TB, answer []byte) int {
	tb.Helper()
	payloads := [][]byte{answer}
	if bytes.HasPrefix(answer, []byte("data:")) {
		payloads = nil
		for _, line := range bytes.Split(answer, []byte("\n")) {
			if p, ok := bytes.CutPrefix(line, []byte("data: ")); ok && string(p) != "[DONE]" {
				payloads = append(payloads, p)
			}
		}
	}
	n := 0
	for _, p := range payloads {
		var a struct {
			Choices []any `json:"choices"`
		}
		if err := json.Unmarshal(p, &a); err != nil {
			tb.Fatalf("%s: %v", p, err)
		}
		n += stringBytes(a.Choices)
	}
	return n
}

func stringBytes(v any) int {
	n := 0
	switch v := v.(type) {
	case string:
		n = len(v)
	case []any:
		for _, x := range v {
			n += stringBytes(x)
		}
	case map[string]any:
		for k, x := range v {
			if k != "logprobs" {
				n += stringBytes(x)
			}
		}
	}
	return n
}

// postAnswer sends body to the endpoint as the renter and returns the
// whole answer, failing unless it is a 200.
func postAnswer(tb testing.TB, f *fixture, e openai.Endpoint, body string) []byte {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.URL+"/v1/"+string(e), bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.RenterKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s: %d %s %v", e, resp.StatusCode, answer, err)
	}
	return answer
}

func available(tb testing.TB, f *fixture) idlegrid.Micros {
	tb.Helper()
	bal, err := f.Admin.Balance(context.Background(), f.RenterID)
	if err != nil {
		tb.Fatal(err)
	}
	return bal.Available
}
