package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/idlegrid/idlegrid"
)

// Prices of the model in these tests, per million tokens: a request of 7
// prompt and 5 completion tokens costs 7×10 + 5×20 = 170 micros, of which
// the platform's 10% is 17.
const (
	testModel  = "llama-test"
	wantCharge = 170
	wantFee    = 17
)

func chatParams(prompt string) oai.ChatCompletionNewParams {
	return oai.ChatCompletionNewParams{
		Model:    testModel,
		Messages: []oai.ChatCompletionMessageParamUnion{oai.SystemMessage("You are terse."), oai.UserMessage(prompt)},
	}
}

func TestGateway_endToEnd(t *testing.T) {
	f := mustFixture(t, nil)
	up := mustMock(t, "alpha")
	node := f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	c := f.sdk(f.RenterKey)
	ctx := context.Background()

	t.Run("chat", func(t *testing.T) {
		var resp *http.Response
		got, err := c.Chat.Completions.New(ctx, chatParams("Say hello."), option.WithResponseInto(&resp))
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
		if text := got.Choices[0].Message.Content; text != "Hello from alpha." {
			t.Errorf("content = %q, want %q", text, "Hello from alpha.")
		}
		if got.Usage.PromptTokens != mockPromptTokens || got.Usage.CompletionTokens != mockCompletionTokens {
			t.Errorf("usage = %+v, want the model server's", got.Usage)
		}
		if n := resp.Header.Get("X-Idlegrid-Node"); n != node.NodeID {
			t.Errorf("X-Idlegrid-Node = %q, want %q", n, node.NodeID)
		}
		if !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req") {
			t.Errorf("X-Request-Id = %q", resp.Header.Get("X-Request-Id"))
		}
	})
	// A stream's usage comes in an event of its own, with no choices, as
	// OpenAI sends it: to a renter who asks for it. The gateway asks the
	// model server for it either way, to meter the stream, and passes it on
	// only when asked, since a client that reads choices[0] of every event,
	// as OpenAI's examples do, fails on it.
	for _, asked := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream/usage asked %v", asked), func(t *testing.T) {
			params := chatParams("Say hello, slowly.")
			if asked {
				params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
			}
			mustSync(t, f)
			before := available(t, f)
			stream := c.Chat.Completions.NewStreaming(ctx, params)
			var text strings.Builder
			var usage oai.CompletionUsage
			chunks, withoutChoices := 0, 0
			for stream.Next() {
				ch := stream.Current()
				chunks++
				if len(ch.Choices) == 0 {
					withoutChoices++
				}
				for _, choice := range ch.Choices {
					text.WriteString(choice.Delta.Content)
				}
				if ch.Usage.TotalTokens > 0 {
					usage = ch.Usage
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			want, wantUsage := 5, int64(0)
			if asked {
				want, wantUsage = 6, mockCompletionTokens
			}
			if text.String() != "Hello from alpha." || chunks != want || withoutChoices != want-5 {
				t.Errorf("streamed %q in %d chunks, %d without choices; want %q in 5, and a usage chunk only if asked", text.String(), chunks, withoutChoices, "Hello from alpha.")
			}
			if usage.CompletionTokens != wantUsage {
				t.Errorf("the stream's usage = %d completion tokens, want %d", usage.CompletionTokens, wantUsage)
			}
			if body := string(up.lastBody()); !strings.Contains(body, `"include_usage":true`) || !strings.Contains(body, `"model":"upstream-model"`) {
				t.Errorf("the model server got %s; want include_usage and the model's upstream name", body)
			}
			mustSync(t, f)
			if spent := before - available(t, f); spent != wantCharge {
				t.Errorf("the renter paid %d, want the model server's usage: %d", spent, wantCharge)
			}
		})
	}
	t.Run("completions and embeddings", func(t *testing.T) {
		got, err := c.Completions.New(ctx, oai.CompletionNewParams{
			Model: testModel, Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon")},
		})
		if err != nil || got.Choices[0].Text != "Hello from alpha." {
			t.Fatalf("completion: %v, %+v", err, got)
		}
		emb, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{
			Model: testModel, Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String("embed me")},
		})
		if err != nil || len(emb.Data) != 1 || len(emb.Data[0].Embedding) != 3 {
			t.Fatalf("embeddings: %v, %+v", err, emb)
		}
	})
	t.Run("metering", func(t *testing.T) {
		mustSync(t, f)
		// chat, two streams and completion cost 170 each; the embedding its
		// 3 prompt tokens at 10 a million: 30, of which the fee is 3.
		const charged = 4*wantCharge + 30
		bal, err := f.Admin.Balance(ctx, f.RenterID)
		if err != nil {
			t.Fatal(err)
		}
		if want := 100*idlegrid.MicrosPerUnit - charged; bal.Available != want {
			t.Errorf("renter available = %d, want %d", bal.Available, want)
		}
		prov, err := f.Store.Balance(ctx, providerOf(t, f, node.NodeID))
		if err != nil {
			t.Fatal(err)
		}
		if want := idlegrid.Micros(4*(wantCharge-wantFee) + 27); prov.Pending != want {
			t.Errorf("provider pending = %d, want %d", prov.Pending, want)
		}
		if sum, err := f.Store.LedgerSum(ctx); err != nil || sum != 0 {
			t.Errorf("the ledger sums to %d (%v), want 0", sum, err)
		}
		us, err := f.Store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: f.RenterID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(us) != 5 {
			t.Fatalf("%d usage records, want 5", len(us))
		}
		for _, u := range us {
			if u.Source != idlegrid.UsageUpstream || u.NodeID != node.NodeID || u.KeyID != f.RenterKeyID || u.Attempts != 1 {
				t.Errorf("usage record %+v: want upstream usage, the node, the key, one attempt", u)
			}
		}
	})
	t.Run("usage counted when the model server gives none", func(t *testing.T) {
		up.set(faultNoUsage)
		defer up.set(faultNone)
		got, err := c.Chat.Completions.New(ctx, chatParams("Hi"))
		if err != nil {
			t.Fatal(err)
		}
		if got.Usage.TotalTokens != 0 {
			t.Fatalf("the mock gave usage %+v", got.Usage)
		}
		mustSync(t, f)
		us, err := f.Store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: f.RenterID, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		// "Hello from alpha." is 17 bytes: 5 tokens at 4 bytes a token.
		if u := us[0]; u.Source != idlegrid.UsageCounted || u.OutputTokens != 5 || u.InputTokens == 0 || u.ChargeMicros == 0 {
			t.Errorf("usage = %+v, want counted, 5 output tokens, some input, a charge", u)
		}
	})
	t.Run("stats", func(t *testing.T) {
		var st struct {
			Models []struct {
				Model            string  `json:"model"`
				Requests         int64   `json:"requests"`
				LatencyP50MS     float64 `json:"latency_p50_ms"`
				LatencyP95MS     float64 `json:"latency_p95_ms"`
				TTFTP50MS        float64 `json:"ttft_p50_ms"`
				TokensPerSecond  float64 `json:"tokens_per_second"`
				MicrosPerMTokens int64   `json:"micros_per_mtokens"`
			} `json:"models"`
		}
		if err := c.Get(ctx, "inference/stats", nil, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Models) != 1 || st.Models[0].Model != testModel || st.Models[0].Requests != 6 {
			t.Fatalf("stats = %+v, want 6 requests of %s", st, testModel)
		}
		m := st.Models[0]
		if m.LatencyP50MS <= 0 || m.LatencyP95MS < m.LatencyP50MS || m.TTFTP50MS <= 0 || m.TTFTP50MS > m.LatencyP95MS {
			t.Errorf("latency figures out of order: %+v", m)
		}
		if m.MicrosPerMTokens <= 0 || m.MicrosPerMTokens > 20_000_000 {
			t.Errorf("micros per million tokens = %d, want between the prices", m.MicrosPerMTokens)
		}
	})
}

func mustSync(tb testing.TB, f *fixture) {
	tb.Helper()
	if err := f.GW.Sync(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

func providerOf(tb testing.TB, f *fixture, nodeID string) string {
	tb.Helper()
	n, err := f.Store.FindNode(context.Background(), nodeID)
	if err != nil {
		tb.Fatal(err)
	}
	return n.ProviderID
}

// apiError returns err as the SDK's error, failing the test otherwise.
func apiError(tb testing.TB, err error) *oai.Error {
	tb.Helper()
	var e *oai.Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %v is not an API error", err)
	}
	return e
}

func TestGateway_errors(t *testing.T) {
	f := mustFixture(t, nil)
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	ctx := context.Background()
	for _, tt := range []struct {
		name       string
		key        string
		params     oai.ChatCompletionNewParams
		opts       []option.RequestOption
		wantStatus int
		wantType   string
		wantParam  string
	}{
		{name: "bad key", key: "igk_nonsense", params: chatParams("Hi"), wantStatus: 401, wantType: "authentication_error"},
		{name: "unknown model", params: oai.ChatCompletionNewParams{Model: "gpt-nope", Messages: chatParams("Hi").Messages},
			wantStatus: 404, wantType: "not_found_error", wantParam: "model"},
		{name: "no messages", params: oai.ChatCompletionNewParams{Model: testModel}, wantStatus: 400, wantType: "invalid_request_error", wantParam: "messages"},
		{name: "bad routing", params: chatParams("Hi"), opts: []option.RequestOption{option.WithJSONSet("provider", map[string]any{"sort": "cheapest"})},
			wantStatus: 400, wantType: "invalid_request_error", wantParam: "provider.sort"},
		{name: "region nobody serves", params: chatParams("Hi"), opts: []option.RequestOption{option.WithJSONSet("provider", map[string]any{"region": []string{"us-east"}})},
			wantStatus: 404, wantType: "not_found_error"},
		{name: "a region no node can have", params: chatParams("Hi"), opts: []option.RequestOption{option.WithJSONSet("provider", map[string]any{"region": []string{"EU-West"}})},
			wantStatus: 400, wantType: "invalid_request_error", wantParam: "provider.region[0]"},
		{name: "the model server's own 400 passes through", params: chatParams("Hi"), opts: []option.RequestOption{option.WithJSONSet("max_tokens", 200000)},
			wantStatus: 400, wantType: "invalid_request_error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			if key == "" {
				key = f.RenterKey
			}
			c := f.sdk(key)
			_, err := c.Chat.Completions.New(ctx, tt.params, tt.opts...)
			e := apiError(t, err)
			if e.StatusCode != tt.wantStatus || e.Type != tt.wantType || e.Param != tt.wantParam {
				t.Errorf("got %d %s param %q (%s), want %d %s param %q", e.StatusCode, e.Type, e.Param, e.Message, tt.wantStatus, tt.wantType, tt.wantParam)
			}
			if id := e.Response.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req") {
				t.Errorf("X-Request-Id = %q: every answer carries one", id)
			}
		})
	}
	t.Run("a provider may not run inference", func(t *testing.T) {
		c := f.sdk(f.providerKey)
		_, err := c.Chat.Completions.New(ctx, chatParams("Hi"))
		if e := apiError(t, err); e.StatusCode != 403 {
			t.Errorf("got %d, want 403", e.StatusCode)
		}
	})
	t.Run("nothing was charged", func(t *testing.T) {
		mustSync(t, f)
		bal, err := f.Admin.Balance(ctx, f.RenterID)
		if err != nil || bal.Available != 100*idlegrid.MicrosPerUnit {
			t.Errorf("balance %+v (%v): failed requests must cost nothing", bal, err)
		}
	})
}
