package gateway_test

import (
	"context"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gateway"
)

// responseParams asks the mock's model for a response to text.
func responseParams(text string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: testModel, Instructions: oai.String("Be brief."), MaxOutputTokens: oai.Int(50),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(text)}}
}

// TestGateway_responses: OpenAI's Responses API through the gateway, as
// OpenAI's Go SDK calls it, whole and streamed: the provider's answer
// passes on, asked to be kept nowhere (store false), and is charged by
// its usage, which a stream gives in its last event.
func TestGateway_responses(t *testing.T) {
	f, up := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)

	whole, err := sdk.Responses.New(ctx, responseParams("Hi"), option.WithJSONSet("store", true))
	if err != nil {
		t.Fatal(describe(err))
	}
	if got := whole.OutputText(); got != "Hello from alpha." || whole.Usage.OutputTokens != mockCompletionTokens {
		t.Errorf("whole response: %q, usage %+v; want alpha's words and its usage", got, whole.Usage)
	}
	if body := string(up.lastBody()); !strings.Contains(body, `"store":false`) || strings.Contains(body, `"store":true`) ||
		!strings.Contains(body, `"model":"upstream-model"`) {
		t.Errorf("the model server was sent %s; want store false, the model by its upstream name", body)
	}

	stream := sdk.Responses.NewStreaming(ctx, responseParams("Hi"))
	var text strings.Builder
	var usage responses.ResponseUsage
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			usage = ev.Response.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(describe(err))
	}
	if text.String() != "Hello from alpha." || usage.OutputTokens != mockCompletionTokens {
		t.Errorf("streamed response: %q, usage %+v; want alpha's words, and its usage in the last event", text.String(), usage)
	}

	mustSync(t, f)
	us, err := f.Store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: f.RenterID, Limit: 10})
	if err != nil || len(us) != 2 {
		t.Fatalf("usage records %v, %v; want two", us, err)
	}
	for _, u := range us {
		if u.Endpoint != "responses" || u.InputTokens != mockPromptTokens || u.OutputTokens != mockCompletionTokens ||
			u.Source != idlegrid.UsageUpstream || u.ChargeMicros != mockPromptTokens*10+mockCompletionTokens*20 {
			t.Errorf("usage %+v; want a response of the mock's usage, charged at alpha's prices", u)
		}
	}
}

// TestGateway_responsesRefused: what else the Responses API keeps at
// OpenAI (prompt templates), and a background response that
// could not be read back (store false), are refused before any provider
// is asked, saying what to send instead.
func TestGateway_responsesRefused(t *testing.T) {
	f, up := mustSolo(t, nil)
	ctx := context.Background()
	sdk := f.sdk(f.RenterKey)
	for field, opt := range map[string]option.RequestOption{
		"background": option.WithJSONSet("store", false),
		"prompt":     option.WithJSONSet("prompt", map[string]any{"id": "pmpt_1"}),
	} {
		_, err := sdk.Responses.New(ctx, backgroundParams("And then?"), opt)
		if e := apiError(t, err); e.StatusCode != 400 || e.Param != field || !strings.Contains(e.Message, "not supported") && !strings.Contains(e.Message, "store true") {
			t.Errorf("%s: %d %s (param %q); want 400 naming it, not supported", field, e.StatusCode, e.Message, e.Param)
		}
	}
	if n := up.Calls.Load(); n != 0 {
		t.Errorf("the model server got %d requests, want none", n)
	}
}

// TestGateway_responsesSkipServersWithout: a model server that predates
// the Responses API answers it 404: the next provider answers, the next
// responses skip that one for a while (its chats do not), and a renter
// whose every provider lacks it gets a 404 naming the endpoint.
func TestGateway_responsesSkipServersWithout(t *testing.T) {
	p := mustPair(t, nil)
	p.A.set(faultChatOnly)
	ctx := context.Background()
	sdk := p.sdk(p.RenterKey)
	got, err := sdk.Responses.New(ctx, responseParams("Hi"), cheapestFirst)
	if err != nil || got.OutputText() != "Hello from beta." {
		t.Fatalf("response with alpha chat-only: %v, %s; want beta's", got, describe(err))
	}
	if _, err := sdk.Responses.New(ctx, responseParams("Hi"), cheapestFirst); err != nil || p.A.Calls.Load() != 1 {
		t.Errorf("a second response: %s, alpha asked %d times; want beta's, alpha asked once in all", describe(err), p.A.Calls.Load())
	}
	var skipped bool
	for _, pl := range mustStats(t, p.fixture).Providers {
		skipped = skipped || pl.NodeID == p.NodeA.NodeID && pl.ResponsesSkippedUntil != nil && pl.TextCompletionsSkippedUntil == nil
	}
	if !skipped {
		t.Errorf("stats do not say alpha is skipped for responses (and only for them): %+v", mustStats(t, p.fixture).Providers)
	}
	if got, _, err := p.chat(t, cheapestFirst); err != nil || got.Choices[0].Message.Content != "Hello from alpha." {
		t.Errorf("a chat: %v, %s; want alpha's, its chats unaffected", got, describe(err))
	}
	p.B.set(faultChatOnly)
	alone := option.WithJSONSet("provider", map[string]any{"only": []string{p.NodeB.NodeID}})
	calls := p.B.Calls.Load()
	_, err = sdk.Responses.New(ctx, responseParams("Hi"), alone)
	if e := apiError(t, err); e.StatusCode != 404 || !strings.Contains(e.Message, "POST /v1/responses") || p.B.Calls.Load() != calls+1 {
		t.Errorf("with no provider serving responses: %d %s, beta asked %d times; want beta asked, then 404 naming POST /v1/responses",
			e.StatusCode, e.Message, p.B.Calls.Load()-calls)
	}
	if got := mustBreakers(t, p.fixture); len(got) != 0 {
		t.Errorf("breakers = %+v, want none tripped", got)
	}
}

// TestGateway_responsesModelGone: a 404 to a response whose message speaks
// of the model ("The model `x` does not exist") is the model not served
// there, the provider's failure as for a chat, not the endpoint: the next
// provider answers, the provider is not skipped for responses, and its
// breaker counts it.
func TestGateway_responsesModelGone(t *testing.T) {
	p := mustPair(t, func(c *gateway.Config) { c.BreakerFailures = 1 })
	p.A.set(faultGone)
	sdk := p.sdk(p.RenterKey)
	got, err := sdk.Responses.New(context.Background(), responseParams("Hi"), cheapestFirst)
	if err != nil || got.OutputText() != "Hello from beta." {
		t.Fatalf("response with alpha's model gone: %v, %s; want beta's", got, describe(err))
	}
	for _, pl := range mustStats(t, p.fixture).Providers {
		if pl.NodeID == p.NodeA.NodeID && pl.ResponsesSkippedUntil != nil {
			t.Errorf("alpha is skipped for responses until %v; want its model gone counted, not the endpoint", pl.ResponsesSkippedUntil)
		}
	}
	if got := mustBreakers(t, p.fixture); len(got) != 1 || got[0].NodeID != p.NodeA.NodeID {
		t.Errorf("breakers = %+v, want alpha's open", got)
	}
}

// TestGateway_responsesStreamBreaks: a response's stream that breaks off
// after its first byte ends with the gateway's error event, which OpenAI's
// SDK raises, and what was delivered is charged, counted from its deltas.
func TestGateway_responsesStreamBreaks(t *testing.T) {
	f, up := mustSolo(t, nil)
	up.set(faultDrop)
	sdk := f.sdk(f.RenterKey)
	stream := sdk.Responses.NewStreaming(context.Background(), responseParams("Hi"))
	var text strings.Builder
	for stream.Next() {
		text.WriteString(stream.Current().Delta)
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "broke off") || text.Len() == 0 || !strings.HasPrefix("Hello from", text.String()) {
		t.Errorf("stream: %q, then %v; want the start of alpha's first two words, then the gateway's error", text.String(), err)
	}
	mustSync(t, f)
	us, err := f.Store.ListInferenceUsage(context.Background(), idlegrid.UsageFilter{AccountID: f.RenterID, Limit: 1})
	if err != nil || len(us) != 1 {
		t.Fatalf("usage %v, %v", us, err)
	}
	if u := us[0]; u.Source != idlegrid.UsageCounted || u.OutputTokens != (int64(text.Len())+3)/4 { // 4 bytes a token, rounded up
		t.Errorf("usage = %+v; want the delivered %q, counted", u, text.String())
	}
}

// TestGateway_responsesFailedByServer: a response that comes back failed
// for its model server's own error (status failed, code server_error),
// whole or streamed, is the renter's answer, but counts against its
// provider as a stream that broke off does: two open its breaker, and the
// next response goes to the other provider.
func TestGateway_responsesFailedByServer(t *testing.T) {
	p := mustPair(t, func(c *gateway.Config) { c.BreakerFailures = 2 })
	p.A.set(faultFailed)
	ctx := context.Background()
	sdk := p.sdk(p.RenterKey)
	whole, err := sdk.Responses.New(ctx, responseParams("Hi"), cheapestFirst)
	if err != nil || whole.Status != "failed" || whole.Error.Code != "server_error" {
		t.Fatalf("whole: %+v, %s; want alpha's failed response", whole, describe(err))
	}
	stream := sdk.Responses.NewStreaming(ctx, responseParams("Hi"), cheapestFirst)
	var last string
	for stream.Next() {
		last = stream.Current().Type
	}
	if err := stream.Err(); err != nil || last != "response.failed" {
		t.Fatalf("streamed: last event %q, %s; want alpha's response.failed", last, describe(err))
	}
	if got := mustBreakers(t, p.fixture); len(got) != 1 || got[0].NodeID != p.NodeA.NodeID {
		t.Errorf("breakers = %+v, want alpha's open", got)
	}
	if got, err := sdk.Responses.New(ctx, responseParams("Hi"), cheapestFirst); err != nil || got.OutputText() != "Hello from beta." {
		t.Errorf("with alpha cut off: %v, %s; want beta's answer", got, describe(err))
	}
}
